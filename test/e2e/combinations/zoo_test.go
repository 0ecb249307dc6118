package combinations_test

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// ruleLabel on a pod selects it for the batch's DrainRules (drainRules): skip (behavior Skip),
// late (behavior Drain, order 1: drained after the others).
const ruleLabel = "combinations.nodemaint.dev/rule"

// drainRules are the DrainRules every batch runs under.
func drainRules() []client.Object {
	rule := func(name, value string, cfg nodemaintv1alpha1.DrainRuleDrainConfig) *nodemaintv1alpha1.DrainRule {
		return &nodemaintv1alpha1.DrainRule{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodemaintv1alpha1.DrainRuleSpec{Drain: cfg, Pods: []nodemaintv1alpha1.DrainRulePodSelector{{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{ruleLabel: value}},
			}}},
		}
	}
	return []client.Object{
		rule("combinations-skip", "skip", nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip}),
		rule("combinations-late", "late", nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorDrain, Order: ptr.To(int32(1))}),
	}
}

// kind is a kind of workload of the zoo: its objects in a namespace, pinned to a lane's nodes,
// and how many pods they run Ready.
type kind struct {
	name    string
	objects func(ns string, nodes []string) []client.Object
	pods    func(nodes []string) int
}

func kindNames(ks []kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.name)
	}
	return out
}

func fixed(n int) func([]string) int { return func([]string) int { return n } }

// zoo is every kind of workload a scenario draws from.
var zoo = []kind{
	{name: "surge", pods: fixed(3), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "surge", nodes, 3, 1, 0)
		return []client.Object{d, budget(d, nil, ptr.To(intstr.FromInt32(1)))}
	}},
	{name: "nosurge", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "nosurge", nodes, 2, 0, 1)
		return []client.Object{d, budget(d, nil, ptr.To(intstr.FromInt32(1)))}
	}},
	{name: "single", pods: fixed(1), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "single", nodes, 1, 1, 0)
		return []client.Object{d, budget(d, ptr.To(intstr.FromInt32(1)), nil)}
	}},
	{name: "hpa", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "hpa", nodes, 2, 1, 0)
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpa"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "hpa"},
				MinReplicas:    ptr.To(int32(2)), MaxReplicas: 4,
			},
		}
		return []client.Object{d, hpa, budget(d, nil, ptr.To(intstr.FromInt32(1)))}
	}},
	{name: "locked", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		// No room to surge and a budget that never allows a disruption: only a deletion moves it.
		d := deployment(ns, "locked", nodes, 2, 0, 1)
		return []client.Object{d, budget(d, ptr.To(intstr.FromString("100%")), nil)}
	}},
	{name: "crowded", pods: func(nodes []string) int { return len(nodes) }, objects: func(ns string, nodes []string) []client.Object {
		// One pod per node, required: the surge pod has nowhere to go.
		d := deployment(ns, "crowded", nodes, int32(len(nodes)), 1, 0)
		d.Spec.Template.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: d.Spec.Selector, TopologyKey: corev1.LabelHostname,
			}},
		}
		return []client.Object{d, budget(d, nil, ptr.To(intstr.FromInt32(1)))}
	}},
	{name: "localstorage", pods: fixed(1), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "localstorage", nodes, 1, 1, 0)
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		return []client.Object{d}
	}},
	{name: "statefulset", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		labels := map[string]string{"app": "db"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(2)), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(labels, nodes),
			},
		}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sts.Spec.Selector, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		}
		return []client.Object{sts, pdb}
	}},
	{name: "bare", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		return []client.Object{bare(ns, "bare-0", nodes, nil), bare(ns, "bare-1", nodes, nil)}
	}},
	{name: "job", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		return []client.Object{job(ns, "batch", nodes, 2, nil, "1h")}
	}},
	{name: "skip", pods: fixed(1), objects: func(ns string, nodes []string) []client.Object {
		// Skipped by its label (under Honor), and guarded by a budget: deleting it breaks two promises.
		p := bare(ns, "skip", nodes, map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip})
		return []client.Object{p, budgetOf(ns, "skip", p.Labels, ptr.To(intstr.FromInt32(1)), nil)}
	}},
	{name: "waitcompleted", pods: fixed(1), objects: func(ns string, nodes []string) []client.Object {
		return []client.Object{job(ns, "finishing", nodes, 1, map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelWaitCompleted}, "40s")}
	}},
	{name: "ruleskip", pods: fixed(1), objects: func(ns string, nodes []string) []client.Object {
		p := bare(ns, "ruleskip", nodes, map[string]string{ruleLabel: "skip"})
		return []client.Object{p, budgetOf(ns, "ruleskip", p.Labels, ptr.To(intstr.FromInt32(1)), nil)}
	}},
	{name: "rulelate", pods: fixed(2), objects: func(ns string, nodes []string) []client.Object {
		d := deployment(ns, "rulelate", nodes, 2, 1, 0)
		d.Spec.Template.Labels[ruleLabel] = "late"
		return []client.Object{d, budget(d, nil, ptr.To(intstr.FromInt32(1)))}
	}},
}

// Pods start and stop a little slowly, so that maintenances and edits land mid-drain.
var podDelays = map[string]string{
	localcluster.PodReadyDelayAnnotation:  "1s",
	localcluster.PodDeleteDelayAnnotation: "1s",
}

// template is a pod template with labels, pinned to nodes.
func template(labels map[string]string, nodes []string) corev1.PodTemplateSpec {
	annotations := map[string]string{}
	for k, v := range podDelays {
		annotations[k] = v
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
				}}},
			}},
		},
	}
}

func deployment(ns, name string, nodes []string, replicas, maxSurge, maxUnavailable int32) *appsv1.Deployment {
	d := framework.NewDeployment(ns, name, replicas)
	d.Spec.Template = template(d.Spec.Template.Labels, nodes)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(maxSurge)), MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
	}}
	return d
}

func budget(d *appsv1.Deployment, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return budgetOf(d.Namespace, d.Name, d.Spec.Selector.MatchLabels, minAvailable, maxUnavailable)
}

func budgetOf(ns, name string, labels map[string]string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels}, MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
		},
	}
}

// bare is a pod nobody owns, labelled app=name and extra.
func bare(ns, name string, nodes []string, extra map[string]string) *corev1.Pod {
	labels := map[string]string{"app": name}
	for k, v := range extra {
		labels[k] = v
	}
	tmpl := template(labels, nodes)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
}

// job is a Job of n pods labelled app=name and extra, each running for runFor; evicted pods are
// replaced, not failures.
func job(ns, name string, nodes []string, n int32, extra map[string]string, runFor string) *batchv1.Job {
	labels := map[string]string{"app": name}
	for k, v := range extra {
		labels[k] = v
	}
	tmpl := template(labels, nodes)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	tmpl.Annotations[localcluster.PodCompleteDelayAnnotation] = runFor
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n), Completions: ptr.To(n), BackoffLimit: ptr.To(int32(1000)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: tmpl,
		},
	}
}
