package drainpreflight

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// largeCluster is a cluster of nodes nodes (4 CPUs, 16Gi, labelled pool=p<i/100>) and 10 pods a
// node: Deployments of 100 pods (one ReplicaSet each, 100m CPU a pod, maxSurge 1), one budget
// each, an autoscaler for every tenth. The pods of a Deployment share their containers, as in
// the controller's cache.
func largeCluster(nodes int) Input {
	in := Input{NamespaceLabels: map[string]map[string]string{"shop": {}}}
	for i := range nodes {
		n := node(fmt.Sprintf("n%05d", i))
		n.Labels["pool"] = fmt.Sprintf("p%03d", i/100)
		in.Nodes = append(in.Nodes, n)
	}
	pods := 10 * nodes
	for d := range pods / 100 {
		name := fmt.Sprintf("web%04d", d)
		dep, rs := deploymentWith(name, 100, func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1))}
		})
		dep.Status.Replicas, dep.Status.UpdatedReplicas, dep.Status.ReadyReplicas, dep.Status.AvailableReplicas = 100, 100, 100, 100
		rs.Status.Replicas = 100
		in.Deployments, in.ReplicaSets = append(in.Deployments, dep), append(in.ReplicaSets, rs)
		in.PodDisruptionBudgets = append(in.PodDisruptionBudgets, pdb(name, 10, 100, 90, name))
		if d%10 == 0 {
			in.HorizontalPodAutoscalers = append(in.HorizontalPodAutoscalers, autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
				Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}},
			})
		}
		var containers []corev1.Container
		for p := range 100 {
			i := d*100 + p
			pod := podOn(in.Nodes[i%nodes].Name, fmt.Sprintf("%s-%03d", name, p), "100m", ownedBy("ReplicaSet", name+"-rs"), labelled("app", name))
			pod.UID = types.UID(fmt.Sprintf("uid-%06d", i))
			// As the controller's cache has them (internal/cachetrim): one instance of the
			// template's containers.
			if containers == nil {
				containers = pod.Spec.Containers
			}
			pod.Spec.Containers = containers
			in.Pods = append(in.Pods, pod)
		}
	}
	return in
}

// poolOf names the nodes of pool p (100 nodes).
func poolOf(in *Input, p int) []string {
	var out []string
	for _, n := range in.Nodes {
		if n.Labels["pool"] == fmt.Sprintf("p%03d", p) {
			out = append(out, n.Name)
		}
	}
	return out
}

// BenchmarkRunLarge: the preflight of a pool of 100 nodes on a cluster of 5,000 nodes and
// 50,000 pods, every target out at once, and in a rollout of 10 at a time.
func BenchmarkRunLarge(b *testing.B) {
	in := largeCluster(5000)
	for _, maxUnavailable := range []int{0, 10} {
		b.Run(fmt.Sprintf("maxUnavailable=%d", maxUnavailable), func(b *testing.B) {
			in := in
			in.Targets, in.MaxUnavailable = poolOf(&in, 7), maxUnavailable
			b.ReportAllocs()
			for b.Loop() {
				if r := Run(in); len(r.Nodes) != 100 {
					b.Fatalf("%d nodes checked", len(r.Nodes))
				}
			}
		})
	}
}

// BenchmarkSnapshotLarge: what preflights share on a cluster of 5,000 nodes and 50,000 pods,
// made once, and the preflight of a pool of 100 nodes on it.
func BenchmarkSnapshotLarge(b *testing.B) {
	in := largeCluster(5000)
	c := in.Cluster()
	b.Run("NewSnapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewSnapshot(c)
		}
	})
	s := NewSnapshot(c)
	for _, maxUnavailable := range []int{0, 10} {
		b.Run(fmt.Sprintf("Run/maxUnavailable=%d", maxUnavailable), func(b *testing.B) {
			spec := Spec{Targets: poolOf(&in, 7), MaxUnavailable: maxUnavailable}
			b.ReportAllocs()
			for b.Loop() {
				if r := s.Run(spec); len(r.Nodes) != 100 {
					b.Fatalf("%d nodes checked", len(r.Nodes))
				}
			}
		})
	}
}
