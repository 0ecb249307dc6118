package drainpreflight

import (
	"math/bits"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// antiAffinity tells whether a pod's required anti-affinity on the hostname leaves a node for
// its surge, the one pod (anti-)affinity rule the preflight checks: each term on
// kubernetes.io/hostname of the pod's own namespace (no namespaces, no namespaceSelector), each
// node its own domain. What nodes hold a pod a term selects is worked out once a preflight, by
// namespace and selector, over the namespace's pods: the check stays linear in the pods.
type antiAffinity struct {
	s    *Snapshot
	p    *placement
	held map[string][]uint64
}

// noRoom says why no node takes the pod's surge for its required anti-affinity ("": some node
// does, or the pod has no such term): every node not out (isOut, by the placer's index) that its
// constraints allow already holds a pod a term selects.
func (a *antiAffinity) noRoom(pod *corev1.Pod, isOut []bool) string {
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		return ""
	}
	free := append([]uint64(nil), a.p.allowedBy(a.p.constraintsOf(pod))...)
	for i, out := range isOut {
		if out {
			free[i/64] &^= 1 << (i % 64)
		}
	}
	candidates := count(free)
	if candidates == 0 {
		return "" // no node at all: NoRoom says so, or the constraints do
	}
	checked := false
	for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname || len(term.Namespaces) > 0 || term.NamespaceSelector != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		checked = true
		for w, held := range a.nodesHolding(pod.Namespace, sel) {
			free[w] &^= held
		}
	}
	if !checked || count(free) > 0 {
		return ""
	}
	return "its required anti-affinity on " + corev1.LabelHostname + " leaves no node: every other node it may run on already holds a pod it repels"
}

// nodesHolding are the nodes (a bit a node, by the placer's index) that hold a pod of the
// namespace the selector selects.
func (a *antiAffinity) nodesHolding(namespace string, sel labels.Selector) []uint64 {
	key := namespace + "\x00" + sel.String()
	if set, ok := a.held[key]; ok {
		return set
	}
	set := make([]uint64, (len(a.p.nodes)+63)/64)
	for _, pod := range a.s.podsByNamespace[namespace] {
		if pod.DeletionTimestamp != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if i, ok := a.p.index[pod.Spec.NodeName]; ok {
			set[i/64] |= 1 << (i % 64)
		}
	}
	a.held[key] = set
	return set
}

func count(set []uint64) int {
	n := 0
	for _, w := range set {
		n += bits.OnesCount64(w)
	}
	return n
}
