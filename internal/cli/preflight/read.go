package preflight

import (
	"context"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
)

// Read lists what drainpreflight.Run needs, with c (drainpreflight itself reads nothing). A
// cluster without the DrainRule API has no DrainRules; any other error, a refused permission included, ends the preflight: a preflight
// that did not see everything would say too little.
func Read(ctx context.Context, c client.Reader, warnings io.Writer) (drainpreflight.Input, error) {
	var (
		in          drainpreflight.Input
		nodes       corev1.NodeList
		pods        corev1.PodList
		pdbs        policyv1.PodDisruptionBudgetList
		deployments appsv1.DeploymentList
		replicaSets appsv1.ReplicaSetList
		hpas        autoscalingv2.HorizontalPodAutoscalerList
		pvcs        corev1.PersistentVolumeClaimList
		pvs         corev1.PersistentVolumeList
		namespaces  corev1.NamespaceList
		rules       nodemaintv1alpha1.DrainRuleList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{
		{"nodes", &nodes}, {"pods", &pods}, {"poddisruptionbudgets.policy", &pdbs},
		{"deployments.apps", &deployments}, {"replicasets.apps", &replicaSets},
		{"horizontalpodautoscalers.autoscaling", &hpas}, {"persistentvolumeclaims", &pvcs},
		{"persistentvolumes", &pvs}, {"namespaces", &namespaces},
	} {
		if err := c.List(ctx, l.list); err != nil {
			if apierrors.IsForbidden(err) {
				return in, fmt.Errorf("preflight lists %s in every namespace, which you may not: %w", l.what, err)
			}
			return in, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	switch err := c.List(ctx, &rules); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		fmt.Fprintln(warnings, "Warning: this cluster has no DrainRule API (nodemaint.dev/v1alpha1): no DrainRules apply")
	case apierrors.IsForbidden(err):
		return in, fmt.Errorf("preflight lists drainrules.nodemaint.dev, which you may not: %w", err)
	case err != nil:
		return in, fmt.Errorf("listing drainrules.nodemaint.dev: %w", err)
	}
	in.Nodes, in.Pods, in.PodDisruptionBudgets = nodes.Items, pods.Items, pdbs.Items
	in.Deployments, in.ReplicaSets = deployments.Items, replicaSets.Items
	in.HorizontalPodAutoscalers, in.PersistentVolumeClaims, in.PersistentVolumes = hpas.Items, pvcs.Items, pvs.Items
	in.DrainRules = rules.Items
	in.NamespaceLabels = make(map[string]map[string]string, len(namespaces.Items))
	for _, ns := range namespaces.Items {
		in.NamespaceLabels[ns.Name] = ns.Labels
	}
	return in, nil
}
