package observe

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// The pods of a node, of every namespace, from one index entry a pod (no entry per namespace as
// a field index of the manager's keeps): the indexer knows only the nodes as values.
func TestPodsOnNode(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{podNodeIndex: podNode})
	pod := func(ns, name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, p := range []*corev1.Pod{pod("a", "web", "n1"), pod("b", "db", "n1"), pod("a", "api", "n2"), pod("a", "pending", "")} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := PodsOnNode(idx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a/web", "b/db"}) {
		t.Errorf("pods on n1: %v, want a/web and b/db", names)
	}
	values := idx.ListIndexFuncValues(podNodeIndex)
	slices.Sort(values)
	if !slices.Equal(values, []string{"n1", "n2"}) {
		t.Errorf("index values %v, want the nodes alone", values)
	}
	// Read only, the listed pods are the cache's own.
	obj, _, _ := idx.GetByKey("a/web")
	if p := pods[slices.IndexFunc(pods, func(p *corev1.Pod) bool { return p.Name == "web" })]; p != obj {
		t.Errorf("want the cached pod itself, not a copy")
	}
}
