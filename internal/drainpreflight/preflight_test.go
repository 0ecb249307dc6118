package drainpreflight

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// The fixtures: nodes of 4 CPUs and 16Gi, pods of workloads in namespace "shop".

func node(name string, mutate ...func(*corev1.Node)) corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status:     corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

// podOn is a Ready, Running pod of the namespace shop on the node, requesting cpu (e.g. "1").
func podOn(nodeName, name, cpu string, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func ownedBy(kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(kind + "-" + name), Controller: ptr.To(true)}}
	}
}

func labelled(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[k] = v }
}

// deploymentWith is a Deployment with one ReplicaSet (name-rs), whose pods are ownedBy("ReplicaSet", name+"-rs").
func deploymentWith(name string, replicas int32, mutate ...func(*appsv1.Deployment)) (appsv1.Deployment, appsv1.ReplicaSet) {
	d := appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("Deployment-" + name)},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType,
		}},
	}
	for _, m := range mutate {
		m(&d)
	}
	rs := appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-rs", UID: types.UID("ReplicaSet-" + name + "-rs"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
	}
	return d, rs
}

func pdb(name string, allowed, healthy, desired int32, matchApp string) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": matchApp}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: healthy, DesiredHealthy: desired},
	}
}

// want is one expected finding: its severity, reason, and substrings of its object and message.
type want struct {
	sev            Severity
	reason         string
	object, inText string
	pods           []string
}

func findingsOf(t *testing.T, r Report, nodeName string) NodeReport {
	t.Helper()
	for _, n := range r.Nodes {
		if n.Name == nodeName {
			return n
		}
	}
	t.Fatalf("no report of node %s in %+v", nodeName, r)
	return NodeReport{}
}

// reasoned is the node's first finding of the reason; the zero Finding if none.
func reasoned(nr NodeReport, reason string) Finding {
	for _, f := range nr.Findings {
		if f.Reason == reason {
			return f
		}
	}
	return Finding{}
}

func describe(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n  %s %s %q %q %v", f.Severity, f.Reason, f.Object, f.Message, f.Pods)
	}
	return b.String()
}

func TestRun(t *testing.T) {
	web, webRS := deploymentWith("web", 2)
	single, singleRS := deploymentWith("single", 1, func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	})
	paused, pausedRS := deploymentWith("paused", 2, func(d *appsv1.Deployment) { d.Spec.Paused = true })
	scaled, scaledRS := deploymentWith("scaled", 2)
	hpa := autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "scaled"},
		Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "scaled"}},
	}
	// A second autoscaler of the same Deployment: the responder declines it (one is no obstacle).
	hpa2 := *hpa.DeepCopy()
	hpa2.Name = "scaled-too"
	unready := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

	for _, tc := range []struct {
		name    string
		in      Input
		node    string
		verdict Severity
		want    []want
		// outWith are the other nodes assumed out with node.
		outWith []string
	}{{
		name: "nothing on the node",
		in:   Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")}},
		node: "n1",
	}, {
		name: "a bare pod is lost",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{podOn("n1", "lonely", "100m")}},
		node: "n1", verdict: Loses,
		want: []want{{Loses, ReasonBarePod, "", "never recreated", []string{"shop/lonely"}}},
	}, {
		name: "a budget that allows nothing blocks a StatefulSet's pod, which cannot surge",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:                 []corev1.Pod{podOn("n1", "db-0", "100m", ownedBy("StatefulSet", "db"), labelled("app", "db")), podOn("n2", "db-1", "100m", ownedBy("StatefulSet", "db"), labelled("app", "db"))},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdb("db", 0, 2, 2, "db")}},
		node: "n1", verdict: Blocks,
		want: []want{
			{Blocks, ReasonBudgetBlocked, "PodDisruptionBudget shop/db", "allows no disruption now (2 healthy, 2 desired)", []string{"shop/db-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/db", "PodDisruptionBudget shop/db allows 0 disruptions now", []string{"shop/db-0"}},
		},
	}, {
		name: "a Deployment that surges needs no disruption",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:                 []corev1.Pod{podOn("n1", "web-a", "100m", ownedBy("ReplicaSet", "web-rs"), labelled("app", "web"))},
			Deployments:          []appsv1.Deployment{web},
			ReplicaSets:          []appsv1.ReplicaSet{webRS},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdb("web", 0, 1, 1, "web")}},
		node: "n1", verdict: Info,
		want: []want{{Info, ReasonSurge, "Deployment shop/web", "does not need", []string{"shop/web-a"}}},
	}, {
		name: "maxSurge 0, one replica, no budget: down while it moves",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:        []corev1.Pod{podOn("n1", "single-a", "100m", ownedBy("ReplicaSet", "single-rs"))},
			Deployments: []appsv1.Deployment{single}, ReplicaSets: []appsv1.ReplicaSet{singleRS}},
		node: "n1", verdict: Loses,
		want: []want{{Loses, ReasonCannotSurge, "Deployment shop/single", "its only live pod moves and nothing surges it: the Deployment's maxSurge is 0: eviction moves its pods: it is down until its replacement is ready; no PodDisruptionBudget", []string{"shop/single-a"}}},
	}, {
		name: "a Deployment scaled by one HorizontalPodAutoscaler surges",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:        []corev1.Pod{podOn("n1", "scaled-a", "100m", ownedBy("ReplicaSet", "scaled-rs")), podOn("n2", "scaled-b", "100m", ownedBy("ReplicaSet", "scaled-rs"))},
			Deployments: []appsv1.Deployment{scaled}, ReplicaSets: []appsv1.ReplicaSet{scaledRS},
			HorizontalPodAutoscalers: []autoscalingv2.HorizontalPodAutoscaler{hpa}},
		node: "n1", verdict: Info,
		want: []want{{Info, ReasonSurge, "Deployment shop/scaled", "surges: a replacement starts", []string{"shop/scaled-a"}}},
	}, {
		name: "paused Deployments and those of two autoscalers do not surge; replicas elsewhere keep them up",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{
				podOn("n1", "paused-a", "100m", ownedBy("ReplicaSet", "paused-rs")), podOn("n2", "paused-b", "100m", ownedBy("ReplicaSet", "paused-rs")),
				podOn("n1", "scaled-a", "100m", ownedBy("ReplicaSet", "scaled-rs")), podOn("n2", "scaled-b", "100m", ownedBy("ReplicaSet", "scaled-rs")),
			},
			Deployments: []appsv1.Deployment{paused, scaled}, ReplicaSets: []appsv1.ReplicaSet{pausedRS, scaledRS},
			HorizontalPodAutoscalers: []autoscalingv2.HorizontalPodAutoscaler{hpa, hpa2}},
		node: "n1", verdict: Info,
		want: []want{
			{Info, ReasonNoSurge, "Deployment shop/paused", "the Deployment is paused", []string{"shop/paused-a"}},
			{Info, ReasonNoSurge, "Deployment shop/scaled", "2 HorizontalPodAutoscalers target", []string{"shop/scaled-a"}},
		},
	}, {
		name: "a node selector only the node matches: the replacement stays Pending",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2"), node("n3")},
			Pods: []corev1.Pod{podOn("n1", "pinned-0", "100m", ownedBy("StatefulSet", "pinned"), func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n1"}
			})}},
		node: "n1", verdict: Loses,
		want: []want{
			{Loses, ReasonCannotSurge, "StatefulSet shop/pinned", "a StatefulSet does not surge", []string{"shop/pinned-0"}},
			{Loses, ReasonNoRoom, "", "0/3 nodes can take it: 1 out at once (n1), 2 not matching the pod's node selector or affinity): its replacement would stay Pending", []string{"shop/pinned-0"}},
		},
	}, {
		name: "required node affinity, taints and cordons",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{
			node("n1", func(n *corev1.Node) { n.Labels["pool"] = "a" }),
			node("n2", func(n *corev1.Node) { n.Labels["pool"] = "a"; n.Spec.Unschedulable = true }),
			node("n3", func(n *corev1.Node) {
				n.Labels["pool"] = "a"
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			}),
			node("n4", func(n *corev1.Node) {
				n.Labels["pool"] = "a"
				n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			}),
			node("n5"),
		},
			Pods: []corev1.Pod{
				podOn("n5", "affine-1", "100m", ownedBy("StatefulSet", "affine")),
				podOn("n5", "fussy-1", "100m", ownedBy("StatefulSet", "fussy")),
				podOn("n1", "affine-0", "100m", ownedBy("StatefulSet", "affine"), func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
					}}}
				}),
				podOn("n1", "fussy-0", "100m", ownedBy("StatefulSet", "fussy"), func(p *corev1.Pod) {
					p.Spec.NodeSelector = map[string]string{"pool": "a"}
					p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
				}),
			}},
		node: "n1", verdict: Info,
		// affine-0 fits on n4 (PreferNoSchedule does not filter); fussy-0 on n3 or n4.
		want: []want{
			{Info, ReasonNoSurge, "StatefulSet shop/affine", "", []string{"shop/affine-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/fussy", "", []string{"shop/fussy-0"}},
		},
	}, {
		name: "tainted and cordoned nodes leave no room",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{
			node("n1"),
			node("n2", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			node("n3", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			}),
		},
			Pods: []corev1.Pod{podOn("n1", "web-0", "100m", ownedBy("StatefulSet", "web")), podOn("n3", "web-1", "100m", ownedBy("StatefulSet", "web"))}},
		node: "n1", verdict: Loses,
		want: []want{
			{Loses, ReasonNoRoom, "", "0/3 nodes can take it: 1 out at once (n1), 1 cordoned, 1 untolerated taint dedicated=gpu:NoSchedule)", []string{"shop/web-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/web", "no PodDisruptionBudget", []string{"shop/web-0"}},
		},
	}, {
		name: "resource requests against what is left: one of two fits",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{
				podOn("n1", "big-0", "2", ownedBy("StatefulSet", "big")),
				podOn("n1", "big-1", "2", ownedBy("StatefulSet", "big")),
				podOn("n2", "there", "1500m"),
			}},
		node: "n1", verdict: Loses,
		want: []want{
			{Loses, ReasonNoRoom, "", "0/2 nodes can take it: 1 out at once (n1), 1 insufficient cpu)", []string{"shop/big-1"}},
			{Loses, ReasonNoSurge, "StatefulSet shop/big", "all its 2 pods are on nodes out at once", []string{"shop/big-0", "shop/big-1"}},
		},
	}, {
		name: "a local volume binds the pod to its node",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{podOn("n1", "db-0", "100m", ownedBy("StatefulSet", "db"), func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
			}), podOn("n2", "db-1", "100m", ownedBy("StatefulSet", "db"))},
			PersistentVolumeClaims: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "local-n1"}}},
			PersistentVolumes: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "local-n1"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
				Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
			}}}}},
		node: "n1", verdict: Loses,
		want: []want{
			{Loses, ReasonNoRoom, "", "1 volume node affinity conflict (PersistentVolume local-n1)", []string{"shop/db-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/db", "", []string{"shop/db-0"}},
		},
	}, {
		name: "skipped pods and why: the label, the toleration, a DrainRule; wait-completed; a broken rule holds",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{
				podOn("n1", "tagged", "100m", ownedBy("StatefulSet", "tagged"), labelled(nodemaintv1alpha1.DrainLabel, nodemaintv1alpha1.DrainLabelSkip)),
				podOn("n1", "tolerant", "100m", ownedBy("StatefulSet", "tolerant"), func(p *corev1.Pod) {
					p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				}),
				podOn("n1", "cache", "100m", ownedBy("StatefulSet", "cache")),
				podOn("n1", "batch", "100m", ownedBy("Job", "batch"), labelled(nodemaintv1alpha1.DrainLabel, nodemaintv1alpha1.DrainLabelWaitCompleted)),
				podOn("n1", "held", "100m", ownedBy("StatefulSet", "held")),
			},
			DrainRules: []nodemaintv1alpha1.DrainRule{
				{ObjectMeta: metav1.ObjectMeta{Name: "a-keep-cache"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
					Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip},
					Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}},
				}},
				{ObjectMeta: metav1.ObjectMeta{Name: "b-broken"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
					Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip},
					Pods: []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "app", Operator: metav1.LabelSelectorOpIn}, // no values: does not parse
					}}}},
				}},
			}},
		node: "n1", verdict: Blocks,
		want: []want{
			{Blocks, ReasonInvalidDrainRule, "DrainRule b-broken", "held until the DrainRule is fixed or deleted", []string{"shop/held"}},
			{Info, ReasonSkipped, "DrainRule a-keep-cache", "stays on the node", []string{"shop/cache"}},
			{Info, ReasonSkipped, "label nodemaint.dev/drain=skip", "stays on the node", []string{"shop/tagged"}},
			{Info, ReasonSkipped, "tolerates node.kubernetes.io/unschedulable", "stays on the node", []string{"shop/tolerant"}},
			// The label comes before the rules, even one that does not parse.
			{Info, ReasonWaitCompleted, "label nodemaint.dev/drain=wait-completed", "never evicts it", []string{"shop/batch"}},
		},
	}, {
		name: "wait-completed, and the label ignored by drainLabelPolicy Ignore",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")}, IgnoreDrainLabel: true,
			Pods: []corev1.Pod{
				podOn("n1", "tagged", "100m", ownedBy("StatefulSet", "tagged"), labelled(nodemaintv1alpha1.DrainLabel, nodemaintv1alpha1.DrainLabelSkip)),
				podOn("n2", "tagged-1", "100m", ownedBy("StatefulSet", "tagged")),
				podOn("n1", "batch", "100m", ownedBy("Job", "batch")),
			},
			DrainRules: []nodemaintv1alpha1.DrainRule{{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
				Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorWaitCompleted},
				Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}}},
			}}}},
		node: "n1", verdict: Info,
		want: []want{
			{Info, ReasonNoSurge, "StatefulSet shop/tagged", "", []string{"shop/tagged"}},
			{Info, ReasonWaitCompleted, "DrainRule jobs", "waits for the pod to complete", []string{"shop/batch"}},
		},
	}, {
		name: "a podSelector: the pods it does not select stay, and their budget blocks nothing",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")}, PodSelector: labels.SelectorFromSet(labels.Set{"app": "web"}),
			Pods: []corev1.Pod{
				podOn("n1", "web-0", "100m", ownedBy("StatefulSet", "web"), labelled("app", "web")),
				podOn("n2", "web-1", "100m", ownedBy("StatefulSet", "web"), labelled("app", "web")),
				podOn("n1", "db-0", "100m", ownedBy("StatefulSet", "db"), labelled("app", "db")),
			},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdb("db", 0, 1, 1, "db")}},
		node: "n1", verdict: Info,
		want: []want{
			{Info, ReasonNoSurge, "StatefulSet shop/web", "", []string{"shop/web-0"}},
			{Info, ReasonSkipped, "not selected by spec.podSelector", "stays on the node", []string{"shop/db-0"}},
		},
	}, {
		name: "two budgets: the Eviction API refuses",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods:                 []corev1.Pod{podOn("n1", "db-0", "100m", ownedBy("StatefulSet", "db"), labelled("app", "db")), podOn("n2", "db-1", "100m", ownedBy("StatefulSet", "db"), labelled("app", "db"))},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdb("db", 1, 2, 1, "db"), pdb("everything", 1, 2, 1, "db")}},
		node: "n1", verdict: Blocks,
		want: []want{
			{Blocks, ReasonMultipleBudgets, "PodDisruptionBudgets shop/db, shop/everything", "refuses to evict it", []string{"shop/db-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/db", "PodDisruptionBudgets shop/db, shop/everything", []string{"shop/db-0"}},
		},
	}, {
		name: "the Eviction API ignores the budget for a Pending pod, and an unready one of a healthy budget or of AlwaysAllow",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{
				podOn("n1", "a-0", "100m", ownedBy("StatefulSet", "a"), labelled("app", "a"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
				podOn("n2", "a-1", "100m", ownedBy("StatefulSet", "a"), labelled("app", "a")),
				podOn("n1", "b-0", "100m", ownedBy("StatefulSet", "b"), labelled("app", "b"), unready),
				podOn("n2", "b-1", "100m", ownedBy("StatefulSet", "b"), labelled("app", "b")),
				podOn("n1", "c-0", "100m", ownedBy("StatefulSet", "c"), labelled("app", "c"), unready),
				podOn("n2", "c-1", "100m", ownedBy("StatefulSet", "c"), labelled("app", "c")),
				podOn("n1", "d-0", "100m", ownedBy("StatefulSet", "d"), labelled("app", "d"), unready),
				podOn("n2", "d-1", "100m", ownedBy("StatefulSet", "d"), labelled("app", "d")),
			},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{
				pdb("a", 0, 1, 2, "a"),
				pdb("b", 0, 1, 1, "b"), // healthy enough: the unready pod goes
				func() policyv1.PodDisruptionBudget {
					b := pdb("c", 0, 1, 2, "c")
					b.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
					return b
				}(),
				pdb("d", 0, 1, 2, "d"), // not healthy enough: blocked
			}},
		node: "n1", verdict: Blocks,
		want: []want{
			{Blocks, ReasonBudgetBlocked, "PodDisruptionBudget shop/d", "1 of its 1 pods are healthy and 2 must be: it allows no disruption until more are healthy", []string{"shop/d-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/a", "PodDisruptionBudget shop/a allows 0 disruptions now", []string{"shop/a-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/b", "", []string{"shop/b-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/c", "", []string{"shop/c-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/d", "", []string{"shop/d-0"}},
		},
	}, {
		name: "DaemonSet, mirror and finished pods are not the drain's; terminating ones are waited for; emptyDir data is lost",
		in: Input{Targets: []string{"n1"}, Nodes: []corev1.Node{node("n1"), node("n2")},
			Pods: []corev1.Pod{
				podOn("n1", "agent", "100m", ownedBy("DaemonSet", "agent")),
				podOn("n1", "static", "100m", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
				podOn("n1", "done", "100m", ownedBy("Job", "done"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				podOn("n1", "going", "100m", ownedBy("StatefulSet", "going"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }),
				podOn("n1", "scratch-0", "100m", ownedBy("StatefulSet", "scratch"), func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				}),
				podOn("n2", "scratch-1", "100m", ownedBy("StatefulSet", "scratch")),
			}},
		node: "n1", verdict: Loses,
		want: []want{
			{Loses, ReasonEmptyDir, "", "data is deleted with the pod", []string{"shop/scratch-0"}},
			{Info, ReasonNoSurge, "StatefulSet shop/scratch", "", []string{"shop/scratch-0"}},
			{Info, ReasonTerminating, "", "already terminating", []string{"shop/going"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(tc.in)
			nr := findingsOf(t, r, tc.node)
			if nr.Verdict != tc.verdict {
				t.Errorf("verdict %q, want %q; findings:%s", nr.Verdict, tc.verdict, describe(nr.Findings))
			}
			if fmt.Sprint(nr.OutWith) != fmt.Sprint(tc.outWith) && !(len(nr.OutWith) == 0 && len(tc.outWith) == 0) {
				t.Errorf("out with %v, want %v", nr.OutWith, tc.outWith)
			}
			if len(nr.Findings) != len(tc.want) {
				t.Fatalf("%d findings, want %d:%s", len(nr.Findings), len(tc.want), describe(nr.Findings))
			}
			for i, w := range tc.want {
				f := nr.Findings[i]
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
				if fmt.Sprint(f.Pods) != fmt.Sprint(w.pods) {
					t.Errorf("finding %d: pods %v; want %v", i, f.Pods, w.pods)
				}
			}
			if r.Blocks() != (tc.verdict == Blocks) {
				t.Errorf("Blocks() = %t with verdict %s", r.Blocks(), tc.verdict)
			}
		})
	}
}

// TestMaxUnavailable: with 2 of 3 nodes out at once, each node is checked with the fullest other
// one; a replacement that then fits nowhere halts a rollout, so it blocks.
func TestMaxUnavailable(t *testing.T) {
	in := Input{
		Targets: []string{"n1", "n2", "n3"},
		Nodes:   []corev1.Node{node("n1"), node("n2"), node("n3"), node("spare")},
		Pods: []corev1.Pod{
			podOn("n1", "a-0", "3", ownedBy("StatefulSet", "a")),
			podOn("n2", "b-0", "2", ownedBy("StatefulSet", "b")),
			podOn("n3", "c-0", "1", ownedBy("StatefulSet", "c")),
			podOn("spare", "d-0", "100m", ownedBy("StatefulSet", "d")),
		},
		MaxUnavailable: 2,
	}
	r := Run(in)
	if r.OutAtOnce != 2 {
		t.Errorf("%d out at once; want 2", r.OutAtOnce)
	}
	for _, want := range []string{"2 of the 3 nodes are out at once", "1 fullest other node"} {
		if !strings.Contains(r.Assumption, want) {
			t.Errorf("assumption %q; want it to say %q", r.Assumption, want)
		}
	}
	// n1 is the fullest: n2 and n3 are checked with it, n1 with n2.
	for name, with := range map[string]string{"n1": "[n2]", "n2": "[n1]", "n3": "[n1]"} {
		if nr := findingsOf(t, r, name); fmt.Sprint(nr.OutWith) != with {
			t.Errorf("%s out with %v, want %s", name, nr.OutWith, with)
		}
	}
	// n1 and n2 out: a-0 (3 CPUs) goes to n3 or spare, b-0 (2 CPUs) to the other; both fit.
	if nr := findingsOf(t, r, "n2"); nr.Verdict != Loses { // StatefulSets of one pod, no budget
		t.Errorf("n2: %s%s", nr.Verdict, describe(nr.Findings))
	}
	// Fill the spare node: with n1 and n2 out, only n3 is left, with room for one of them.
	in.Pods[3] = podOn("spare", "d-0", "3900m", ownedBy("StatefulSet", "d"))
	r = Run(in)
	nr := findingsOf(t, r, "n2")
	if nr.Verdict != Blocks {
		t.Errorf("n2 with the spare full: verdict %s; want %s:%s", nr.Verdict, Blocks, describe(nr.Findings))
	}
	f := reasoned(nr, ReasonNoRoom)
	if f.Severity != Blocks {
		t.Errorf("n2 with the spare full: %s of severity %q; want %s", ReasonNoRoom, f.Severity, Blocks)
	}
	if got := fmt.Sprint(f.Pods); got != "[shop/b-0]" {
		t.Errorf("n2 with the spare full: %s for pods %s; want [shop/b-0]", ReasonNoRoom, got)
	}
	for _, want := range []string{"0/4 nodes can take it: 2 out at once (n1, n2), 2 insufficient cpu", "a rollout halts (ReplacementsUnschedulable)"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("n2 with the spare full: message %q; want it to say %q", f.Message, want)
		}
	}
	// Without the budget, all three are out: nothing is left but the full spare.
	in.MaxUnavailable = 0
	r = Run(in)
	if r.OutAtOnce != 3 {
		t.Errorf("without a budget: %d out at once; want 3", r.OutAtOnce)
	}
	if !strings.Contains(r.Assumption, "all 3 nodes are out at once") {
		t.Errorf("without a budget: assumption %q; want it to say all 3 nodes are out at once", r.Assumption)
	}
	for _, nr := range r.Nodes {
		if nr.Verdict != Loses {
			t.Errorf("%s without a budget: verdict %s; want %s:%s", nr.Name, nr.Verdict, Loses, describe(nr.Findings))
		}
		f := reasoned(nr, ReasonNoRoom)
		if f.Severity != Loses {
			t.Errorf("%s without a budget: %s of severity %q; want %s", nr.Name, ReasonNoRoom, f.Severity, Loses)
		}
		if strings.Contains(f.Message, "rollout") {
			t.Errorf("%s without a budget: message %q; want no word of a rollout", nr.Name, f.Message)
		}
	}
}

func TestMissingTargets(t *testing.T) {
	r := Run(Input{Targets: []string{"n1", "nope", "n1"}, Nodes: []corev1.Node{node("n1")}})
	if got := fmt.Sprint(r.Missing); got != "[nope]" {
		t.Errorf("missing %s; want [nope]", got)
	}
	if len(r.Nodes) != 1 || r.Nodes[0].Name != "n1" {
		t.Errorf("nodes %+v; want n1 once", r.Nodes)
	}
}

// TestSnapshotServesConcurrentRuns: preflights of different targets run at once on one snapshot
// each report what a preflight of their own would (go test -race checks that they share it
// without writing to it).
func TestSnapshotServesConcurrentRuns(t *testing.T) {
	in := largeCluster(300)
	s := NewSnapshot(in.Cluster())
	specs := []Spec{{Targets: poolOf(&in, 0)}, {Targets: poolOf(&in, 1), MaxUnavailable: 10}, {Targets: poolOf(&in, 2)[:5], IgnoreDrainLabel: true},
		{Targets: append(poolOf(&in, 0), poolOf(&in, 2)...), MaxUnavailable: 150}}
	got := make([]Report, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { got[i] = s.Run(spec) })
	}
	wg.Wait()
	for i, spec := range specs {
		alone := in
		alone.Targets, alone.MaxUnavailable, alone.IgnoreDrainLabel = spec.Targets, spec.MaxUnavailable, spec.IgnoreDrainLabel
		if want := Run(alone); !reflect.DeepEqual(got[i], want) {
			t.Errorf("spec %d: the shared snapshot reported\n%+v\nalone\n%+v", i, got[i], want)
		}
	}
}

// TestMaxChecks: past its bound, where the replacements would go is not checked, and the report
// says so instead of reporting them NoRoom; within it, they are placed.
func TestMaxChecks(t *testing.T) {
	in := Input{
		Targets: []string{"n1"},
		Nodes:   []corev1.Node{node("n1"), node("n2")},
		Pods:    []corev1.Pod{podOn("n1", "big-0", "5", ownedBy("StatefulSet", "big")), podOn("n1", "small-0", "1", ownedBy("StatefulSet", "small"))},
	}
	// 2 displaced pods against 2 nodes: 4 checks.
	s := NewSnapshot(in.Cluster())
	placed := s.Run(Spec{Targets: in.Targets, MaxChecks: 4})
	if placed.NotPlaced != "" {
		t.Errorf("within the bound: not placed %q; want all placed", placed.NotPlaced)
	}
	if n1 := findingsOf(t, placed, "n1"); reasoned(n1, ReasonNoRoom).Reason != ReasonNoRoom {
		t.Errorf("within the bound: no %s finding; want big-0's:%s", ReasonNoRoom, describe(n1.Findings))
	}
	r := s.Run(Spec{Targets: in.Targets, MaxChecks: 3})
	if !strings.Contains(r.NotPlaced, "1 set of nodes out at once, 2 pods displaced in all, against 2 nodes is more than this preflight checks (3 pod-node pairs at most)") {
		t.Errorf("not placed: %q", r.NotPlaced)
	}
	for _, f := range findingsOf(t, r, "n1").Findings {
		if f.Reason == ReasonNoRoom {
			t.Errorf("NoRoom past the bound:%s", describe(findingsOf(t, r, "n1").Findings))
		}
	}
}
