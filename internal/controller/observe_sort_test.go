package controller

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSortByName(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		pods := make([]corev1.Pod, n)
		for i := range pods {
			pods[i].ObjectMeta = metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", rng.IntN(3)), Name: fmt.Sprintf("p-%d", i)}
		}
		rng.Shuffle(n, func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		want := slices.Clone(pods)
		slices.SortFunc(want, func(a, b corev1.Pod) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		sortByName(pods)
		for i := range pods {
			if pods[i].Namespace != want[i].Namespace || pods[i].Name != want[i].Name {
				t.Fatalf("%d pods: position %d holds %s/%s, want %s/%s", n, i, pods[i].Namespace, pods[i].Name, want[i].Namespace, want[i].Name)
			}
		}
	}
}
