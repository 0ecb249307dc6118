package invariants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// ourPrefix starts the name of every annotation and taint of nodemaint's.
const ourPrefix = "nodemaint.dev/"

// Snapshot is what CheckClean reads from the cluster.
type Snapshot struct {
	Nodes       []corev1.Node
	Pods        []corev1.Pod
	Deployments []appsv1.Deployment
	ReplicaSets []appsv1.ReplicaSet
	// HorizontalPodAutoscalers: a record of bounds raised for a surge is a leftover.
	HorizontalPodAutoscalers []autoscalingv2.HorizontalPodAutoscaler
	// EvictionRequests and Evictions are read where lifecycle.k8s.io/v1alpha1 is served.
	EvictionRequests []lifecyclev1alpha1.EvictionRequest
	Evictions        []lifecyclev1alpha1.Eviction
	// NodeMaintenances are read where nodemaint's CRDs are served.
	NodeMaintenances []nodemaintv1alpha1.NodeMaintenance
	// Machines are the Cluster API Machines that exist (namespace/name), read with
	// Options.ClusterAPI; nil where they were not read.
	Machines []string
}

// CheckClean reads the nodes, and the pods, Deployments, ReplicaSets and HorizontalPodAutoscalers of the watched
// namespaces, from the API server (not the informers' caches), and returns an error naming
// every leftover of nodemaint's (see Leftovers), nil when there is none. Call it once every
// maintenance is over. It assumes nobody but nodemaint scaled the Deployments since the checker
// first saw them.
func (c *Checker) CheckClean(ctx context.Context, namespaces ...string) error {
	var snap Snapshot
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	snap.Nodes = nodes.Items
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snap.Pods = append(snap.Pods, pods.Items...)
		deps, err := c.client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snap.Deployments = append(snap.Deployments, deps.Items...)
		rss, err := c.client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snap.ReplicaSets = append(snap.ReplicaSets, rss.Items...)
		hpas, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snap.HorizontalPodAutoscalers = append(snap.HorizontalPodAutoscalers, hpas.Items...)
		ers, err := c.client.LifecycleV1alpha1().EvictionRequests(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the cluster does not serve the EvictionRequest API
		}
		if err != nil {
			return err
		}
		snap.EvictionRequests = append(snap.EvictionRequests, ers.Items...)
		evs, err := c.client.LifecycleV1alpha1().Evictions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snap.Evictions = append(snap.Evictions, evs.Items...)
	}
	if c.dynamic != nil {
		list, err := c.dynamic.Resource(nodemaintv1alpha1.GroupVersion.WithResource("nodemaintenances")).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err): // no CRDs
		case err != nil:
			return err
		default:
			for _, u := range list.Items {
				var nm nodemaintv1alpha1.NodeMaintenance
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nm); err != nil {
					return err
				}
				snap.NodeMaintenances = append(snap.NodeMaintenances, nm)
			}
		}
	}
	if snap.Machines, err = c.listMachines(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	problems := Leftovers(snap, c.state.baseline)
	c.mu.Unlock()
	if len(problems) > 0 {
		return errors.New(joinProblems(problems))
	}
	return nil
}

// Leftovers returns, sorted, one line per leftover of nodemaint's in the snapshot:
//   - a node cordoned that nodemaint cordoned (annotation nodemaint.dev/cordoned) or that was not
//     cordoned when first seen; a nodemaint.dev/ taint, or the out-of-service taint on a node that
//     did not have it; a nodemaint.dev/ annotation; the UnderMaintenance condition or a KEP-5683
//     condition of reason NodeMaintenance;
//   - a pod with nodemaint's EvacuationRequest, an EvacuationInitiated without any request, or
//     a nodemaint.dev/ annotation;
//   - a Deployment or ReplicaSet with a nodemaint.dev/ annotation, a Deployment whose replicas
//     are not what its user set; a HorizontalPodAutoscaler with a nodemaint.dev/ annotation (the
//     record of bounds raised for a surge: they are not restored yet);
//   - an EvictionRequest of nodemaint's (requester nodemaint.dev/node-maintenance; saying when
//     its pod is gone), or any EvictionRequest with a nodemaint.dev/ label or annotation; an
//     Eviction that names nodemaint as a requester (label or status.requesters), or one of a
//     pod that is gone that no EvictionRequest owns (the garbage collector's to take);
//   - a nodemaint.dev/ label on a node, or on a pod other than nodemaint.dev/drain (its owner's);
//   - a NodeMaintenance being deleted that is still there (its finalizer never released);
//   - where the Machines were read, a NodeMaintenance of a Cluster API Machine that is gone,
//     unless its owner node is gone too (the garbage collector's).
func Leftovers(snap Snapshot, base Baseline) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Spec.Unschedulable && (n.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "" || !base.Unschedulable[n.Name]) {
			add("node %s: cordoned", n.Name)
		}
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, ourPrefix) || (t.Key == corev1.TaintNodeOutOfService && !base.OutOfService[n.Name]) {
				add("node %s: taint %s:%s", n.Name, t.Key, t.Effect)
			}
		}
		for _, a := range ours(n.Annotations) {
			add("node %s: annotation %s", n.Name, a)
		}
		for _, k := range nodedecide.AutoscalerAnnotations {
			v, ok := n.Annotations[k]
			if was, had := base.Autoscalers[n.Name][k]; ok && (!had || v != was) {
				add("node %s: annotation %s=%s (not so when first seen)", n.Name, k, v)
			}
		}
		for _, l := range ours(n.Labels) {
			add("node %s: label %s", n.Name, l)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance || c.Reason == nodemaintv1alpha1.NodeConditionReasonNodeMaintenance {
				add("node %s: condition %s=%s (%s)", n.Name, c.Type, c.Status, c.Reason)
			}
		}
	}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		k := key(p.Namespace, p.Name)
		if c := evacuation.Condition(p, evacuation.Request); c != nil && c.Reason == evacuation.ReasonNodeMaintenance {
			add("pod %s: condition %s=%s (%s)", k, c.Type, c.Status, c.Reason)
		}
		if c := evacuation.Condition(p, evacuation.Initiated); c != nil && evacuation.Condition(p, evacuation.Request) == nil {
			add("pod %s: condition %s=%s (%s) without a request", k, c.Type, c.Status, c.Reason)
		}
		for _, a := range ours(p.Annotations) {
			add("pod %s: annotation %s", k, a)
		}
		for _, l := range ours(p.Labels) {
			if !strings.HasPrefix(l, nodemaintv1alpha1.DrainLabel+"=") {
				add("pod %s: label %s", k, l)
			}
		}
	}
	for i := range snap.Deployments {
		d := &snap.Deployments[i]
		k := key(d.Namespace, d.Name)
		for _, a := range ours(d.Annotations) {
			add("Deployment %s: annotation %s", k, a)
		}
		if want, ok := base.Replicas[k]; ok && ptr.Deref(d.Spec.Replicas, 1) != want {
			add("Deployment %s: replicas %d, its user set %d", k, ptr.Deref(d.Spec.Replicas, 1), want)
		}
	}
	for i := range snap.HorizontalPodAutoscalers {
		hpa := &snap.HorizontalPodAutoscalers[i]
		for _, a := range ours(hpa.Annotations) {
			add("HorizontalPodAutoscaler %s: annotation %s", key(hpa.Namespace, hpa.Name), a)
		}
	}
	for i := range snap.ReplicaSets {
		rs := &snap.ReplicaSets[i]
		for _, a := range ours(rs.Annotations) {
			add("ReplicaSet %s: annotation %s", key(rs.Namespace, rs.Name), a)
		}
	}
	pods := map[string]bool{}
	for i := range snap.Pods {
		pods[key(snap.Pods[i].Namespace, snap.Pods[i].Name)] = true
	}
	podGone := func(namespace, name string) string {
		if name != "" && !pods[key(namespace, name)] {
			return ", its pod " + key(namespace, name) + " is gone"
		}
		return ""
	}
	for _, r := range snap.EvictionRequests {
		k := key(r.Namespace, r.Name)
		pod := ""
		if r.Spec.Target.Pod != nil {
			pod = r.Spec.Target.Pod.Name
		}
		if r.Spec.Requester == ernames.Requester {
			add("EvictionRequest %s: intent %s%s", k, r.Spec.Intent, podGone(r.Namespace, pod))
			continue
		}
		for _, a := range append(ours(r.Labels), ours(r.Annotations)...) {
			add("EvictionRequest %s of %s: %s", k, r.Spec.Requester, a)
		}
	}
	for _, e := range snap.Evictions {
		k := key(e.Namespace, e.Name)
		_, labelled := e.Labels[ernames.Requester]
		named := slices.ContainsFunc(e.Status.Requesters, func(r lifecyclev1alpha1.Requester) bool { return r.Name == ernames.Requester })
		pod := ""
		if e.Spec.Target.Pod != nil {
			pod = e.Spec.Target.Pod.Name
		}
		switch gone := podGone(e.Namespace, pod); {
		case labelled || named:
			add("Eviction %s: names %s%s", k, ernames.Requester, gone)
		case gone != "" && !ownedByRequest(e, snap.EvictionRequests):
			// Upstream's controller keeps an Eviction once its pod is gone, saying so
			// (TargetEvicted), for its requesters: the garbage collector takes it with the last
			// of its EvictionRequests. One no request owns any more is left behind.
			add("Eviction %s: its pod %s is gone", k, key(e.Namespace, pod))
		}
	}
	for _, nm := range snap.NodeMaintenances {
		if nm.DeletionTimestamp != nil {
			add("NodeMaintenance %s: deleted at %s, still there (finalizers %v)", nm.Name, nm.DeletionTimestamp.UTC().Format(time.RFC3339), nm.Finalizers)
		}
	}
	problems = append(problems, machineLeftovers(snap)...)
	sort.Strings(problems)
	return problems
}

// ours returns the nodemaint.dev/ annotations, as key=value, sorted.
func ours(annotations map[string]string) []string {
	var out []string
	for k, v := range annotations {
		if strings.HasPrefix(k, ourPrefix) {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// ownedByRequest reports whether one of the EvictionRequests owns the Eviction.
func ownedByRequest(e lifecyclev1alpha1.Eviction, reqs []lifecyclev1alpha1.EvictionRequest) bool {
	return slices.ContainsFunc(e.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "EvictionRequest" && slices.ContainsFunc(reqs, func(r lifecyclev1alpha1.EvictionRequest) bool {
			return r.Namespace == e.Namespace && r.UID == o.UID
		})
	})
}
