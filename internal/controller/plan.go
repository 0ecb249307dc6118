package controller

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// +kubebuilder:rbac:groups=nodemaint.dev,resources=drainrules,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// planOptions are what the plan of a node depends on besides the cluster's objects.
type planOptions struct {
	// ownPods are nodemaint-controller's own pods, which are protected.
	ownPods *OwnPods
	// ignoreDrainLabel: a maintenance draining the node ignores the pod label nodemaint.dev/drain.
	ignoreDrainLabel bool
}

// planNode classifies the targeted pods of a node by the DrainRules.
func planNode(ctx context.Context, c client.Reader, node *corev1.Node, pods []corev1.Pod, opts planOptions) (drain.Plan, error) {
	var rules nodemaintv1alpha1.DrainRuleList
	if err := c.List(ctx, &rules); err != nil {
		return drain.Plan{}, err
	}
	compiled := drain.NewRules(rules.Items).IgnoringDrainLabel(opts.ignoreDrainLabel)
	namespaces := map[string]map[string]string{}
	// A stable order keeps the status (which names a few pods) from changing for nothing.
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	var classified []drain.Classified
	for i := range pods {
		pod := &pods[i]
		if !maintenance.Targeted(pod) {
			continue
		}
		nsLabels, ok := namespaces[pod.Namespace]
		if !ok {
			ns := &corev1.Namespace{}
			if err := c.Get(ctx, types.NamespacedName{Name: pod.Namespace}, ns); client.IgnoreNotFound(err) != nil {
				return drain.Plan{}, err
			}
			nsLabels = ns.Labels
			namespaces[pod.Namespace] = nsLabels
		}
		class := compiled.Classify(pod, nsLabels, node.Labels)
		if opts.ownPods.Match(pod) {
			class.Protected = "nodemaint-controller's own pod"
		}
		classified = append(classified, drain.Classified{Pod: pod, Class: class})
	}
	return drain.NewPlan(classified), nil
}

func policyOf(intent maintenance.NodeIntent) drain.Policy {
	return drain.Policy{Evict: intent.Evict, ResponseTimeout: intent.ResponseTimeout}
}

// maxBlockedNames is how many pods the DrainTimedOut condition names.
const maxBlockedNames = drain.MaxBlockedNames
