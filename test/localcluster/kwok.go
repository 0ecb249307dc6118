package localcluster

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod annotations that set how long the fake kubelet takes over a pod, as Go durations
// ("5s"); each defaults to 1s. See kwok_pod_stages.yaml.
const (
	// PodCreateDelayAnnotation is the time from scheduling until the pod has an IP and its
	// containers are created (Pending, not Ready).
	PodCreateDelayAnnotation = "pod-create.stage.kwok.x-k8s.io/delay"
	// PodReadyDelayAnnotation is the start-up time of the pod: from container creation until
	// it is Running and Ready.
	PodReadyDelayAnnotation = "pod-ready.stage.kwok.x-k8s.io/delay"
	// PodCompleteDelayAnnotation is how long a Job's pod runs, once Ready, before it Succeeds.
	PodCompleteDelayAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"
	// PodDeleteDelayAnnotation is the shutdown time of the pod: once deleted, it goes away
	// after this delay or at the end of its deletion grace period, whichever comes first.
	PodDeleteDelayAnnotation = "pod-delete.stage.kwok.x-k8s.io/delay"
)

// nodeLeaseDuration is the duration of the node Leases kwok renews, every quarter of it, as
// the kubelet does with its default 40s.
const nodeLeaseDuration = 40

//go:embed kwok_pod_stages.yaml
var podStages []byte

func writeKwokStages(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pod-stages.yaml"), podStages, 0o644)
}

// kwokArgs returns kwok's command line: it manages the nodes labelled KwokNodeLabel=fake with
// Leases and kwok's own node Stages, and their pods with kwok_pod_stages.yaml.
func (c *Cluster) kwokArgs(kubeconfig string) []string {
	stages := filepath.Join(filepath.Dir(c.binDir), "stages")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-nodes-with-label-selector=" + KwokNodeLabel + "=fake",
		"--node-lease-duration-seconds=" + strconv.Itoa(nodeLeaseDuration),
		// Room for 65k pod IPs, where kwok's default has 254.
		"--cidr=10.0.0.0/16",
		"--config=" + filepath.Join(stages, "node", "fast", "node-initialize.yaml"),
		"--config=" + filepath.Join(stages, "node", "heartbeat-with-lease", "node-heartbeat-with-lease.yaml"),
		"--config=" + filepath.Join(c.dir, "kwok", "pod-stages.yaml"),
	}
}

// StopKwok stops kwok, and with it every fake kubelet: nothing happens to pods any more, and
// nodes go NotReady once nodeMonitorGracePeriod (40s) passed without heartbeats.
func (c *Cluster) StopKwok() error { return stopProcesses(c.log, c.dir, kwok) }

// StartKwok starts kwok again after StopKwok; it does nothing when kwok runs.
func (c *Cluster) StartKwok(ctx context.Context) error {
	if _, ok := runningPid(c.dir, kwok); ok {
		return nil
	}
	// A new kwok has a new identity and would wait for the Leases of the old one to expire;
	// without them it takes the nodes over at once, as a restarted kubelet does.
	err := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	_, err = c.startProcess(kwok)
	return err
}
