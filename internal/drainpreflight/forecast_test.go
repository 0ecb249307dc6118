package drainpreflight

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// budgetWith is pdb with a spec: minAvailable or maxUnavailable (nil: not set) and the pods it
// expects.
func budgetWith(name string, allowed, healthy, desired, expected int32, app string, minAvailable, maxUnavailable *intstr.IntOrString) policyv1.PodDisruptionBudget {
	b := pdb(name, allowed, healthy, desired, app)
	b.Spec.MinAvailable, b.Spec.MaxUnavailable, b.Status.ExpectedPods = minAvailable, maxUnavailable, expected
	return b
}

func controlPlaneNode(name string) corev1.Node {
	return node(name, func(n *corev1.Node) { n.Labels[nodemaintv1alpha1.ControlPlaneLabel] = "" })
}

// repelling gives the pod a required anti-affinity on the hostname against pods labelled app.
func repelling(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}}}}
	}
}

// TestForecast: each finding of the deadlock forecast, and what keeps it away.
func TestForecast(t *testing.T) {
	noSurge, noSurgeRS := deploymentWith("single", 1, func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	})
	surging, surgingRS := deploymentWith("solo", 1)
	one, zero := ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(0))
	sts := func(nodeName, name string, mutate ...func(*corev1.Pod)) corev1.Pod {
		return podOn(nodeName, name, "100m", append([]func(*corev1.Pod){ownedBy("StatefulSet", "db"), labelled("app", "db")}, mutate...)...)
	}
	three := func(targets ...string) Input {
		return Input{Targets: targets, Nodes: []corev1.Node{node("n1"), node("n2"), node("n3"), node("n4")},
			Pods:                 []corev1.Pod{sts("n1", "db-0"), sts("n2", "db-1"), sts("n3", "db-2")},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{budgetWith("db", 1, 3, 2, 3, "db", nil, one)}}
	}
	for _, tc := range []struct {
		name      string
		in        Input
		node      string
		want      []want // the forecast's findings of the node, in order
		deadlocks int
	}{{
		name: "one replica, maxSurge 0, minAvailable 1: the budget never allows a disruption and nothing surges",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:        []corev1.Pod{podOn("n1", "single-a", "100m", ownedBy("ReplicaSet", "single-rs"), labelled("app", "single"))},
			Deployments: []appsv1.Deployment{noSurge}, ReplicaSets: []appsv1.ReplicaSet{noSurgeRS},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{budgetWith("single", 0, 1, 1, 1, "single", one, nil)}},
		node: "n1",
		want: []want{
			{Blocks, ReasonBudgetBlocked, "PodDisruptionBudget shop/single", "minAvailable 1 is all of its 1 pod: it never allows a disruption", []string{"shop/single-a"}},
			{Blocks, ReasonCannotSurge, "Deployment shop/single", "maxSurge is 0", []string{"shop/single-a"}},
		},
		deadlocks: 2,
	}, {
		name: "maxUnavailable 0 never allows a disruption",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:                 []corev1.Pod{sts("n1", "db-0"), sts("n2", "db-1")},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{budgetWith("db", 0, 2, 2, 2, "db", nil, zero)}},
		node:      "n1",
		want:      []want{{Blocks, ReasonBudgetBlocked, "PodDisruptionBudget shop/db", "maxUnavailable 0: it never allows a disruption", []string{"shop/db-0"}}},
		deadlocks: 1,
	}, {
		name: "unhealthy pods: fewer healthy than desired",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:                 []corev1.Pod{sts("n1", "db-0"), sts("n2", "db-1", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }), sts("n2", "db-2")},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{budgetWith("db", 0, 2, 2, 3, "db", nil, one)}},
		node:      "n1",
		want:      []want{{Blocks, ReasonBudgetBlocked, "PodDisruptionBudget shop/db", "2 of its 3 pods are healthy and 2 must be: it allows no disruption until more are healthy", []string{"shop/db-0"}}},
		deadlocks: 1,
	}, {
		name: "two nodes a turn take two pods of a budget that allows one",
		in:   func() Input { in := three("n1", "n2", "n3"); in.MaxUnavailable = 2; return in }(),
		node: "n3",
		want: []want{{Blocks, ReasonBudgetExceededByTurn, "PodDisruptionBudget shop/db", "the 2 nodes out at once (n1, n3) hold 2 of its pods that the drain evicts, and it allows 1 disruption now", []string{"shop/db-2"}}},
		// Each of the three nodes is out with another.
		deadlocks: 3,
	}, {
		name: "one node a turn takes one pod of it",
		in:   func() Input { in := three("n1", "n2", "n3"); in.MaxUnavailable = 1; return in }(),
		node: "n3",
	}, {
		name: "two pods of a budget that allows one on one node",
		in: func() Input {
			in := three("n1")
			in.Pods[1].Spec.NodeName = "n1"
			return in
		}(),
		node:      "n1",
		want:      []want{{Blocks, ReasonBudgetExceededByTurn, "PodDisruptionBudget shop/db", "the 1 node out at once (n1) hold 2 of its pods", []string{"shop/db-0", "shop/db-1"}}},
		deadlocks: 1,
	}, {
		name: "a single-pod StatefulSet without a budget cannot surge: it goes down",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{sts("n1", "db-0")}},
		node: "n1",
		want: []want{{Loses, ReasonCannotSurge, "StatefulSet shop/db", "a StatefulSet does not surge", []string{"shop/db-0"}}},
	}, {
		name: "a single-pod Deployment whose anti-affinity leaves no node cannot surge",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2"), node("n3", func(n *corev1.Node) { n.Spec.Unschedulable = true })},
			Pods: []corev1.Pod{
				podOn("n1", "solo-a", "100m", ownedBy("ReplicaSet", "solo-rs"), labelled("app", "solo"), repelling("solo")),
				podOn("n2", "other", "100m", ownedBy("StatefulSet", "other"), labelled("app", "solo")),
				podOn("n2", "other-1", "100m", ownedBy("StatefulSet", "other"), labelled("app", "other")),
			},
			Deployments: []appsv1.Deployment{surging}, ReplicaSets: []appsv1.ReplicaSet{surgingRS}},
		node: "n1",
		want: []want{{Loses, ReasonCannotSurge, "Deployment shop/solo", "its required anti-affinity on kubernetes.io/hostname leaves no node", []string{"shop/solo-a"}}},
	}, {
		name: "with a free node, it surges",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2"), node("n3")},
			Pods: []corev1.Pod{
				podOn("n1", "solo-a", "100m", ownedBy("ReplicaSet", "solo-rs"), labelled("app", "solo"), repelling("solo")),
				podOn("n2", "other", "100m", ownedBy("StatefulSet", "other"), labelled("app", "solo")),
				podOn("n2", "other-1", "100m", ownedBy("StatefulSet", "other"), labelled("app", "other")),
			},
			Deployments: []appsv1.Deployment{surging}, ReplicaSets: []appsv1.ReplicaSet{surgingRS}},
		node: "n1",
	}, {
		// A rollout takes control-plane nodes one at a time, whatever its maxUnavailable.
		name: "two control-plane nodes in a rollout of two at a time",
		in:   Input{Targets: []string{"cp1", "cp2", "w1"}, MaxUnavailable: 2, Nodes: []corev1.Node{controlPlaneNode("cp1"), controlPlaneNode("cp2"), node("w1"), node("w2")}},
		node: "cp2",
	}, {
		name:      "all at once",
		in:        Input{Targets: []string{"cp1", "cp2"}, Nodes: []corev1.Node{controlPlaneNode("cp1"), controlPlaneNode("cp2"), node("w1")}},
		node:      "cp1",
		want:      []want{{Blocks, ReasonControlPlaneTogether, "nodes cp1, cp2", "2 control-plane nodes are out at once", nil}},
		deadlocks: 2,
	}, {
		name: "one node a turn",
		in:   Input{Targets: []string{"cp1", "cp2", "w1"}, MaxUnavailable: 1, Nodes: []corev1.Node{controlPlaneNode("cp1"), controlPlaneNode("cp2"), node("w1")}},
		node: "cp1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(tc.in)
			nr := findingsOf(t, r, tc.node)
			var got []Finding
			for _, f := range nr.Findings {
				if isForecast(f.Reason) {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings of the forecast, want %d:%s", len(got), len(tc.want), describe(nr.Findings))
			}
			for i, w := range tc.want {
				f := got[i]
				if f.Severity != w.sev {
					t.Errorf("finding %d: severity %s; want %s", i, f.Severity, w.sev)
				}
				if f.Reason != w.reason {
					t.Errorf("finding %d: reason %s; want %s", i, f.Reason, w.reason)
				}
				if !strings.Contains(f.Object, w.object) {
					t.Errorf("finding %d: object %q; want it to name %q", i, f.Object, w.object)
				}
				if !strings.Contains(f.Message, w.inText) {
					t.Errorf("finding %d: message %q; want it to say %q", i, f.Message, w.inText)
				}
				if strings.Join(f.Pods, ",") != strings.Join(w.pods, ",") {
					t.Errorf("finding %d: pods %v; want %v", i, f.Pods, w.pods)
				}
			}
			if n := r.Deadlocks; n != tc.deadlocks {
				t.Errorf("Deadlocks() = %d, want %d", n, tc.deadlocks)
			}
		})
	}
}

func isForecast(reason string) bool {
	switch reason {
	case ReasonBudgetBlocked, ReasonBudgetExceededByTurn, ReasonCannotSurge, ReasonControlPlaneTogether:
		return true
	}
	return false
}
