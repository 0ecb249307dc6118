package phase

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
func (o *phaseOptions) classicDrain(ctx context.Context) error {
	cs, t := o.cs, &o.target
	names := t.Nodes
	if t.Selector != "" {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: t.Selector})
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
		Timeout: o.timeout,
		// kubectl drain's default: the Helper's zero value retries an eviction refused by a
		// PodDisruptionBudget in a tight loop.
		EvictErrorRetryDelay: 5 * time.Second,
		Out:                  o.Streams.Out,
		ErrOut:               o.Streams.ErrOut,
	}
	o.kubectl.classic(helper, o.dryRun)
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
		fmt.Fprintf(o.Streams.Out, "node/%s drained\n", name)
	}
	return nil
}
