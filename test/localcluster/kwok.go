package localcluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/yaml"
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

//go:embed kwok_node_stages.yaml
var nodeStages []byte

// kwokNodeStages are kwok's own node Stages the cluster runs, relative to the stages directory
// hack/control-plane.sh installs: one marks a new node (or one that is not Ready) Ready, the
// other writes the status of a Ready node every 10 to 20 minutes, as a kubelet with a Lease.
var kwokNodeStages = []string{
	filepath.Join("node", "fast", "node-initialize.yaml"),
	filepath.Join("node", "heartbeat-with-lease", "node-heartbeat-with-lease.yaml"),
}

// ownKwokStages are the Stages of this package, by the name of their file in the cluster's kwok
// directory: the one that holds a node's status, and the pods' (with kwok's options).
var ownKwokStages = []struct {
	name  string
	stage []byte
}{{"node-stages.yaml", nodeStages}, {"pod-stages.yaml", podStages}}

// kwokStageFiles are the names of the Stage files writeKwokStages writes into the cluster's kwok
// directory, in the order kwokArgs passes them.
func kwokStageFiles() []string {
	var names []string
	for _, name := range kwokNodeStages {
		names = append(names, filepath.Base(name))
	}
	for _, own := range ownKwokStages {
		names = append(names, own.name)
	}
	return names
}

// writeKwokStages writes into dir the Stages kwokArgs names: kwok's node Stages from
// stagesDir, each made to skip the nodes with NodeStatusHeldAnnotation, then ownKwokStages.
func writeKwokStages(dir, stagesDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range kwokNodeStages {
		stage, err := os.ReadFile(filepath.Join(stagesDir, name))
		if err != nil {
			return err
		}
		if stage, err = skipHeldNodes(stage); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), stage, 0o644); err != nil {
			return err
		}
	}
	for _, own := range ownKwokStages {
		if err := os.WriteFile(filepath.Join(dir, own.name), own.stage, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// skipHeldNodes adds to the selector of a kwok node Stage that the node has no
// NodeStatusHeldAnnotation.
func skipHeldNodes(stage []byte) ([]byte, error) {
	var s map[string]any
	if err := yaml.Unmarshal(stage, &s); err != nil {
		return nil, err
	}
	notHeld := map[string]any{
		"key":      fmt.Sprintf(".metadata.annotations[%q]", NodeStatusHeldAnnotation),
		"operator": "DoesNotExist",
	}
	exprs, found, err := unstructured.NestedSlice(s, "spec", "selector", "matchExpressions")
	if err != nil || !found {
		return nil, fmt.Errorf("no spec.selector.matchExpressions (%v)", err)
	}
	if err := unstructured.SetNestedSlice(s, append(exprs, notHeld), "spec", "selector", "matchExpressions"); err != nil {
		return nil, err
	}
	return yaml.Marshal(s)
}

// kwokArgs returns kwok's command line: it manages the nodes labelled KwokNodeLabel=fake with
// Leases and kwok's own node Stages, and their pods with kwok_pod_stages.yaml.
func (c *Cluster) kwokArgs(kubeconfig string) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-nodes-with-label-selector=" + KwokNodeLabel + "=fake",
		"--node-lease-duration-seconds=" + strconv.Itoa(nodeLeaseDuration),
		// Room for 65k pod IPs, where kwok's default has 254.
		"--cidr=10.0.0.0/16",
	}
	for _, name := range kwokStageFiles() {
		args = append(args, "--config="+filepath.Join(c.dir, "kwok", name))
	}
	return args
}

// kwokStagesDir is where hack/control-plane.sh installs kwok's Stages, next to the binaries.
func (c *Cluster) kwokStagesDir() string { return filepath.Join(filepath.Dir(c.binDir), "stages") }

// StopKwok stops kwok, and with it every fake kubelet: nothing happens to pods any more, and
// nodes go NotReady once nodeMonitorGracePeriod (40s) passed without heartbeats.
func (c *Cluster) StopKwok() error { return stopProcesses(c.log, c.dir, kwok) }

// StartKwok starts kwok again after StopKwok; it does nothing when kwok runs. It returns once
// the new kwok plays the kubelet of every node it selects, and has been shown every pod bound
// to them that waits for a kubelet.
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
	if _, err := c.startProcess(kwok); err != nil {
		return err
	}
	nodes, err := c.waitKwokLeasesRenewed(ctx)
	if err != nil {
		return err
	}
	return c.resyncKwokPods(ctx, nodes)
}

// kwokRestartTimeout bounds the wait for a restarted kwok to renew the Leases of its nodes:
// it renews them every quarter of nodeLeaseDuration.
const kwokRestartTimeout = nodeLeaseDuration * time.Second

// waitKwokLeasesRenewed waits until kwok renewed, after creating it, the Lease of every node
// it selects, and returns those nodes.
//
// kwok lists the pods of a node the moment it creates the node's Lease, but it acts on a pod
// only once its own watch of the Leases shows the Lease: when the list comes first, kwok skips
// the node's pods until they change. A renewal proves the watch caught up, since kwok renews
// a Lease it reads from that watch (and creates one it does not find there).
func (c *Cluster) waitKwokLeasesRenewed(ctx context.Context) (sets.Set[string], error) {
	var nodes sets.Set[string]
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, kwokRestartTimeout, true, func(ctx context.Context) (bool, error) {
		nodeList, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KwokNodeLabel + "=fake"})
		if err != nil {
			return false, err
		}
		leases, err := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		renewed := sets.New[string]()
		for _, l := range leases.Items {
			// kwok creates a Lease with its renewTime; the API server's creationTimestamp,
			// rounded down to the second, is less than a second before it.
			if l.Spec.RenewTime != nil && l.Spec.RenewTime.Sub(l.CreationTimestamp.Time) > time.Second {
				renewed.Insert(l.Name)
			}
		}
		nodes = sets.New[string]()
		for _, n := range nodeList.Items {
			nodes.Insert(n.Name)
		}
		return renewed.IsSuperset(nodes), nil
	})
	if err != nil {
		return nil, fmt.Errorf("kwok restarted, but did not renew the Leases of its nodes within %s: %w", kwokRestartTimeout, err)
	}
	return nodes, nil
}

// kwokResyncAnnotation is set on the pods resyncKwokPods shows kwok again.
const kwokResyncAnnotation = "localcluster.nodemaint.io/kwok-resync"

// resyncKwokPods changes every pod bound to one of nodes that waits for its kubelet, to start
// or to stop, so that kwok sees it again (see waitKwokLeasesRenewed).
func (c *Cluster) resyncKwokPods(ctx context.Context, nodes sets.Set[string]) error {
	pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kwokResyncAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	for _, p := range pods.Items {
		if !nodes.Has(p.Spec.NodeName) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp == nil && podutils.IsPodReady(&p) {
			continue
		}
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
