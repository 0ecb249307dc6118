// Package hostaffinity tells whether a pod's required pod anti-affinity on the hostname leaves
// it a node, the one pod (anti-)affinity rule the preflight checks: each term on
// kubernetes.io/hostname of the pod's own namespace (no namespaces, no namespaceSelector), each
// node its own domain. What nodes hold a pod a term selects is worked out once, by namespace and
// selector, over the namespace's pods: the check stays linear in the pods.
package hostaffinity

import (
	"math/bits"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Holders knows which nodes hold the pods of a namespace that a selector selects, for one
// preflight (it is not safe for concurrent use).
type Holders struct {
	pods  map[string][]*corev1.Pod
	index map[string]int
	nodes int
	held  map[string][]uint64
}

// New reads the bound pods by namespace, and the nodes by their index (0 to nodes-1).
func New(podsByNamespace map[string][]*corev1.Pod, index map[string]int, nodes int) *Holders {
	return &Holders{pods: podsByNamespace, index: index, nodes: nodes, held: map[string][]uint64{}}
}

// Repels reports whether the pod has a required anti-affinity on the hostname.
func Repels(pod *corev1.Pod) bool {
	aff := pod.Spec.Affinity
	return aff != nil && aff.PodAntiAffinity != nil && len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// NoRoom reports whether the pod's required anti-affinity terms on the hostname of its own
// namespace leave none of the candidate nodes (a bit a node, by index; changed): each holds a
// pod a term selects. False when it has no such term, or when there is no candidate at all.
func (h *Holders) NoRoom(pod *corev1.Pod, candidates []uint64) bool {
	if !Repels(pod) || count(candidates) == 0 {
		return false
	}
	checked := false
	for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname || len(term.Namespaces) > 0 || term.NamespaceSelector != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		checked = true
		for w, held := range h.holding(pod.Namespace, sel) {
			candidates[w] &^= held
		}
	}
	return checked && count(candidates) == 0
}

// holding are the nodes that hold a pod of the namespace the selector selects.
func (h *Holders) holding(namespace string, sel labels.Selector) []uint64 {
	key := namespace + "\x00" + sel.String()
	if set, ok := h.held[key]; ok {
		return set
	}
	set := make([]uint64, (h.nodes+63)/64)
	for _, pod := range h.pods[namespace] {
		if pod.DeletionTimestamp != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if i, ok := h.index[pod.Spec.NodeName]; ok {
			set[i/64] |= 1 << (i % 64)
		}
	}
	h.held[key] = set
	return set
}

func count(set []uint64) int {
	n := 0
	for _, w := range set {
		n += bits.OnesCount64(w)
	}
	return n
}
