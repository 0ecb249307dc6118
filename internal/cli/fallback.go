package cli

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// hasNodeMaintenanceAPI reports whether the cluster serves nodemaint.dev/v1alpha1 NodeMaintenances.
func hasNodeMaintenanceAPI(cs kubernetes.Interface) (bool, error) {
	resources, err := cs.Discovery().ServerResourcesForGroupVersion(nodemaintv1alpha1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range resources.APIResources {
		if r.Name == "nodemaintenances" {
			return true, nil
		}
	}
	return false, nil
}

// classicDrain is kubectl drain, for clusters without nodemaint (KEP-4212 asks kubectl to fall
// back so): cordon, then evict every pod but DaemonSet pods, through PodDisruptionBudgets.
func classicDrain(ctx context.Context, o *options, cs kubernetes.Interface, t *target, timeout time.Duration, flags *kubectlDrainFlags, dryRun cmdutil.DryRunStrategy) error {
	names := t.nodes
	if t.selector != "" {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: t.selector})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
	}
	helper := &drain.Helper{
		Ctx:     ctx,
		Client:  cs,
		Timeout: timeout,
		// kubectl drain's default: the Helper's zero value retries an eviction refused by a
		// PodDisruptionBudget in a tight loop.
		EvictErrorRetryDelay: 5 * time.Second,
		Out:                  o.streams.Out,
		ErrOut:               o.streams.ErrOut,
	}
	flags.classic(helper, dryRun)
	for _, name := range names {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
			return fmt.Errorf("cordoning %s: %w", name, err)
		}
		if err := drain.RunNodeDrain(helper, name); err != nil {
			return fmt.Errorf("draining %s: %w", name, err)
		}
		fmt.Fprintf(o.streams.Out, "node/%s drained\n", name)
	}
	return nil
}
