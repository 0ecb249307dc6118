package invariants

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

const ns = "app"

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newDeployment(name string, replicas int32, maxSurge intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	}
}

func newReplicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: d.Name + "-rs",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: d.Name, Controller: ptr.To(true)}},
	}, Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas}}
}

func newPod(rs *appsv1.ReplicaSet, app string, i int, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs.Name, Controller: ptr.To(true)}},
		},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func terminating(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = &metav1.Time{Time: now}
	return pod
}

func newPDB(app string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
		},
	}
}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s %s %d<%d", v.Kind, v.Object, v.Healthy, v.Want))
	}
	return out
}

// A workload that starts up while the checker watches is no violation: pods that are not Ready
// yet, or that flap before the budget was ever satisfied, are not disruptions.
func TestStartupIsNoViolation(t *testing.T) {
	s := newState(nil)
	d := newDeployment("web", 3, intstr.FromInt32(0))
	rs := newReplicaSet(d)
	s.pdb(newPDB("web", nil, ptr.To(intstr.FromInt32(1))), false)
	s.deployment(d, false)
	s.replicaSet(rs, false)
	p0 := newPod(rs, "web", 0, true)
	s.pod(p0, false, now)
	s.pod(newPod(rs, "web", 1, false), false, now)
	// Ready, then not Ready, before the budget was ever satisfied (1 of the 2 it needs).
	s.pod(newPod(rs, "web", 0, false), false, now)
	s.pod(p0, false, now)
	if len(s.violations) > 0 {
		t.Fatalf("violations while starting up: %v", kinds(s.violations))
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		minAvailable, maxUnavailable *intstr.IntOrString
		// leave is how many of the 4 Ready pods leave, one by one; want the violations.
		leave int
		want  []string
	}{
		{name: "maxUnavailable 1, one leaves", maxUnavailable: ptr.To(intstr.FromInt32(1)), leave: 1},
		{name: "maxUnavailable 1, two leave", maxUnavailable: ptr.To(intstr.FromInt32(1)), leave: 2,
			want: []string{"PodDisruptionBudget app/web 2<3"}},
		{name: "minAvailable 2, two leave", minAvailable: ptr.To(intstr.FromInt32(2)), leave: 2},
		{name: "minAvailable 2, three leave", minAvailable: ptr.To(intstr.FromInt32(2)), leave: 3,
			want: []string{"PodDisruptionBudget app/web 1<2"}},
		{name: "minAvailable 50%, three leave", minAvailable: ptr.To(intstr.FromString("50%")), leave: 3,
			want: []string{"PodDisruptionBudget app/web 1<2"}},
		{name: "maxUnavailable 25% rounds up to 1, two leave", maxUnavailable: ptr.To(intstr.FromString("25%")), leave: 2,
			want: []string{"PodDisruptionBudget app/web 2<3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(nil)
			// maxSurge 0: only the budget is checked.
			d := newDeployment("web", 4, intstr.FromInt32(0))
			rs := newReplicaSet(d)
			s.deployment(d, false)
			s.replicaSet(rs, false)
			var pods []*corev1.Pod
			for i := range 4 {
				pods = append(pods, newPod(rs, "web", i, true))
				s.pod(pods[i], false, now)
			}
			s.pdb(newPDB("web", tc.minAvailable, tc.maxUnavailable), false)
			for i := range tc.leave {
				// Alternately terminating and deleted outright: both leave.
				if i%2 == 0 {
					s.pod(terminating(pods[i]), false, now)
				} else {
					s.pod(pods[i], true, now)
				}
			}
			if got := kinds(s.violations); !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v", got, tc.want)
			}
		})
	}
}

// A replacement that is not Ready yet does not count, and an update of a pod that did not
// leave is no new violation.
func TestPodDisruptionBudgetCountsFromPods(t *testing.T) {
	s := newState(nil)
	d := newDeployment("web", 2, intstr.FromInt32(0))
	rs := newReplicaSet(d)
	s.deployment(d, false)
	s.replicaSet(rs, false)
	s.pdb(newPDB("web", ptr.To(intstr.FromInt32(2)), nil), false)
	p0, p1 := newPod(rs, "web", 0, true), newPod(rs, "web", 1, true)
	s.pod(p0, false, now)
	s.pod(p1, false, now)
	// Replacement created, not Ready; then p0 is deleted: 1 healthy of 2.
	s.pod(newPod(rs, "web", 2, false), false, now)
	s.pod(p0, true, now)
	if got := kinds(s.violations); !slices.Equal(got, []string{"PodDisruptionBudget app/web 1<2"}) {
		t.Fatalf("violations %v", got)
	}
	// A status update of a not-Ready pod is no new violation.
	s.pod(newPod(rs, "web", 2, false), false, now)
	if len(s.violations) != 1 {
		t.Fatalf("violations %v", kinds(s.violations))
	}
}

// A surge-capable Deployment mid-surge: its user wants 3, spec.replicas is 4. The evacuated pod
// may go once its replacement is Ready; before that, its going is a violation. A maxSurge 0
// Deployment is not held to it.
func TestSurgeCapableDeployment(t *testing.T) {
	surging := func(d *appsv1.Deployment) *appsv1.Deployment {
		d = d.DeepCopy()
		d.Spec.Replicas = ptr.To(int32(4))
		d.Annotations = map[string]string{evacuation.SurgeAnnotation: `{"originalReplicas":3,"surge":1,"startTime":"2026-01-02T15:04:05.000000Z"}`}
		return d
	}
	for _, tc := range []struct {
		name            string
		maxSurge        intstr.IntOrString
		replacementUp   bool
		autoscalers     int
		noRoom          bool
		wantViolations  []string
		wantDeployments int
	}{
		{name: "replacement Ready first", maxSurge: intstr.FromInt32(1), replacementUp: true, wantDeployments: 1},
		{name: "evacuated pod removed before its replacement is Ready", maxSurge: intstr.FromInt32(1),
			wantViolations: []string{"DeploymentReady app/web 2<3"}, wantDeployments: 1},
		{name: "maxSurge 25% of 3 rounds up to 1", maxSurge: intstr.FromString("25%"),
			wantViolations: []string{"DeploymentReady app/web 2<3"}, wantDeployments: 1},
		{name: "maxSurge 0 is not surge-capable", maxSurge: intstr.FromInt32(0)},
		// The Deployment responder surges a Deployment of one autoscaler (it raises its bounds)...
		{name: "scaled by a HorizontalPodAutoscaler", maxSurge: intstr.FromInt32(1), autoscalers: 1,
			wantViolations: []string{"DeploymentReady app/web 2<3"}, wantDeployments: 1},
		// ... and declines one of two: its budget moves it.
		{name: "scaled by two HorizontalPodAutoscalers", maxSurge: intstr.FromInt32(1), autoscalers: 2, wantDeployments: 1},
		// A surge that cannot be scheduled is given up: its budget moves it.
		{name: "its surge found no room", maxSurge: intstr.FromInt32(1), noRoom: true, wantDeployments: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(nil)
			d := newDeployment("web", 3, tc.maxSurge)
			rs := newReplicaSet(d)
			s.deployment(d, false)
			s.replicaSet(rs, false)
			var pods []*corev1.Pod
			for i := range 3 {
				pods = append(pods, newPod(rs, "web", i, true))
				s.pod(pods[i], false, now)
			}
			for i := range tc.autoscalers {
				s.hpa(&autoscalingv2.HorizontalPodAutoscaler{
					ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: fmt.Sprintf("web-%d", i)},
					Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
						APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
				}, false)
			}
			s.deployment(surging(d), false)
			replacement := newPod(rs, "web", 3, false)
			if tc.noRoom {
				replacement.Status.Conditions = append(replacement.Status.Conditions, corev1.PodCondition{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
			}
			s.pod(replacement, false, now)
			if tc.replacementUp {
				s.pod(newPod(rs, "web", 3, true), false, now)
			}
			s.pod(terminating(pods[0]), false, now)
			s.pod(pods[0], true, now)
			if got := kinds(s.violations); !slices.Equal(got, tc.wantViolations) {
				t.Errorf("violations %v, want %v", got, tc.wantViolations)
			}
			if got := s.baseline.Replicas["app/web"]; got != 3 {
				t.Errorf("baseline replicas %d, want 3", got)
			}
			armed := 0
			for _, d := range s.deployments {
				if d.armed {
					armed++
				}
			}
			if armed != tc.wantDeployments {
				t.Errorf("%d Deployments checked, want %d", armed, tc.wantDeployments)
			}
		})
	}
}

// An autoscaler whose minimum nodemaint raised for a surge may scale the Deployment to the surged
// count itself, before or after the responder scaled it back: the Deployment then carries no
// surge record, and the autoscaler's record (naming the Deployment and the surge, its UID the
// autoscaler's) says the count is the surge's. The evacuated pod's leaving is no violation then,
// while the same count without that record, or with a record of another object, is the user's.
func TestAutoscalerSurgeIsNotTheUsers(t *testing.T) {
	const record = `{"uid":"hpa-uid","deployment":"web","minReplicas":2,"maxReplicas":5,"setMinReplicas":3,` +
		`"surge":{"originalReplicas":2,"surge":1,"startTime":"2026-01-02T15:04:05.000000Z"},"restored":"2026-01-02T15:05:05.000000Z"}`
	for _, tc := range []struct {
		name           string
		annotations    map[string]string
		wantViolations []string
	}{
		{name: "the autoscaler's record names the surge", annotations: map[string]string{evacuation.SurgeBoundsAnnotation: record}},
		{name: "no record", wantViolations: []string{"DeploymentReady app/web 2<3"}},
		{name: "a record of another autoscaler's UID",
			annotations:    map[string]string{evacuation.SurgeBoundsAnnotation: strings.Replace(record, "hpa-uid", "other", 1)},
			wantViolations: []string{"DeploymentReady app/web 2<3"}},
		{name: "a record of another Deployment",
			annotations:    map[string]string{evacuation.SurgeBoundsAnnotation: strings.Replace(record, `"web"`, `"api"`, 1)},
			wantViolations: []string{"DeploymentReady app/web 2<3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(nil)
			d := newDeployment("web", 3, intstr.FromInt32(1))
			rs := newReplicaSet(d)
			s.hpa(&autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "web", UID: "hpa-uid", Annotations: tc.annotations},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
					APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			}, false)
			s.deployment(d, false)
			s.replicaSet(rs, false)
			var pods []*corev1.Pod
			for i := range 3 {
				pods = append(pods, newPod(rs, "web", i, true))
				s.pod(pods[i], false, now)
			}
			s.pod(terminating(pods[0]), false, now)
			if got := kinds(s.violations); !slices.Equal(got, tc.wantViolations) {
				t.Errorf("violations %v, want %v", got, tc.wantViolations)
			}
		})
	}
}

// The informers deliver their first lists in no particular order: a Deployment whose ReplicaSet
// comes after its pods is checked from then on all the same.
func TestDeploymentArmedByLateReplicaSet(t *testing.T) {
	s := newState(nil)
	d := newDeployment("web", 3, intstr.FromInt32(1))
	rs := newReplicaSet(d)
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, newPod(rs, "web", i, true))
		s.pod(pods[i], false, now)
	}
	s.deployment(d, false)
	s.replicaSet(rs, false)
	s.pod(terminating(pods[0]), false, now)
	if got, want := kinds(s.violations), []string{"DeploymentReady app/web 2<3"}; !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
}

// A budget over a StatefulSet takes its expected pods from the StatefulSet's replicas.
// A pod that turns not Ready without being deleted (its node went NotReady, a probe failed) is
// an involuntary disruption, which no budget governs: no violation. It still does not count, so
// deleting another pod while it is down is one.
func TestNotReadyIsInvoluntary(t *testing.T) {
	s := newState(nil)
	d := newDeployment("web", 3, intstr.FromInt32(1))
	rs := newReplicaSet(d)
	s.deployment(d, false)
	s.replicaSet(rs, false)
	s.pdb(newPDB("web", nil, ptr.To(intstr.FromInt32(1))), false)
	for i := range 3 {
		s.pod(newPod(rs, "web", i, true), false, now)
	}
	s.pod(newPod(rs, "web", 0, false), false, now)
	if len(s.violations) != 0 {
		t.Fatalf("a pod turning not Ready: violations %v", kinds(s.violations))
	}
	s.pod(terminating(newPod(rs, "web", 1, true)), false, now)
	want := []string{"PodDisruptionBudget app/web 1<2", "DeploymentReady app/web 1<3"}
	if got := kinds(s.violations); !slices.Equal(got, want) {
		t.Fatalf("deleting a pod while another is not Ready: violations %v, want %v", got, want)
	}
}

func TestPodDisruptionBudgetOfStatefulSet(t *testing.T) {
	s := newState(nil)
	s.statefulSet(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3))}}, false)
	s.pdb(newPDB("db", nil, ptr.To(intstr.FromInt32(1))), false)
	var pods []*corev1.Pod
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%d", i), Labels: map[string]string{"app": "db"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		pods = append(pods, pod)
		s.pod(pod, false, now)
	}
	s.pod(pods[0], true, now)
	if len(s.violations) != 0 {
		t.Fatalf("violations %v", kinds(s.violations))
	}
	s.pod(pods[1], true, now)
	if got := kinds(s.violations); !slices.Equal(got, []string{"PodDisruptionBudget app/db 1<2"}) {
		t.Fatalf("violations %v", got)
	}
}

func TestLeftovers(t *testing.T) {
	base := Baseline{
		Unschedulable: map[string]bool{"cordoned-before": true},
		OutOfService:  map[string]bool{},
		Replicas:      map[string]int32{"app/web": 3, "app/api": 2},
		Autoscalers:   map[string]map[string]string{"n1": {nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation: "true"}},
	}
	clean := Snapshot{
		Nodes: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"other.io/x": "y",
				// Another writer's, there when first seen.
				nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation: "true"}}},
			// Cordoned before nodemaint: stays cordoned.
			{ObjectMeta: metav1.ObjectMeta{Name: "cordoned-before"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		},
		Pods: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{nodemaintv1alpha1.DrainLabel: "skip"}},
			// A descheduler's request is not ours.
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "Descheduler"}}},
		}},
		Deployments: []appsv1.Deployment{*newDeployment("web", 3, intstr.FromInt32(1))},
		ReplicaSets: []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-rs"}}},
		// Another requester's EvictionRequest and its Eviction are not ours.
		EvictionRequests: []lifecyclev1alpha1.EvictionRequest{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{Requester: "descheduler.example.com/x"}}},
		Evictions: []lifecyclev1alpha1.Eviction{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-1-p",
			Labels: map[string]string{"descheduler.example.com/x": "requester"}}}},
	}
	if got := Leftovers(clean, base); len(got) > 0 {
		t.Fatalf("leftovers of a clean cluster: %q", got)
	}

	dirty := Snapshot{
		Nodes: []corev1.Node{{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
				nodemaintv1alpha1.CordonedAnnotation: "true", nodemaintv1alpha1.MaintenancesAnnotation: "nm=Drain",
				nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: "true",
			}},
			Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
				{Key: nodemaintv1alpha1.PlannedMaintenanceTaint, Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute},
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: nodemaintv1alpha1.NodeConditionUnderMaintenance, Status: corev1.ConditionTrue, Reason: "Drain"}}},
		}, {
			// Cordoned, without nodemaint's annotation, but not cordoned when first seen.
			ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: corev1.NodeSpec{Unschedulable: true},
		}},
		Pods: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Annotations: map[string]string{evacuation.OriginalDeletionCostAnnotation: ""}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance},
			}},
		}, {
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "DeploymentSurge"},
			}},
		}},
		Deployments: []appsv1.Deployment{func() appsv1.Deployment {
			d := newDeployment("web", 4, intstr.FromInt32(1))
			d.Annotations = map[string]string{evacuation.SurgeAnnotation: "{}"}
			return *d
		}()},
		ReplicaSets: []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-rs",
			Annotations: map[string]string{evacuation.EvacuationReadyAnnotation: "true"}}}},
		EvictionRequests: []lifecyclev1alpha1.EvictionRequest{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodemaint-1"},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{Requester: ernames.Requester, Intent: lifecyclev1alpha1.EvictionRequestIntentWithdrawn}}},
		Evictions: []lifecyclev1alpha1.Eviction{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-1-p",
			Labels: map[string]string{ernames.Requester: "requester"}}}},
	}
	want := []string{
		"Deployment app/web: annotation nodemaint.dev/evacuation-surge={}",
		"Deployment app/web: replicas 4, its user set 3",
		"Eviction app/pod-1-p: names nodemaint.dev/node-maintenance",
		"EvictionRequest app/nodemaint-1: intent Withdrawn",
		"ReplicaSet app/web-rs: annotation nodemaint.dev/evacuation-ready=true",
		"node n1: annotation karpenter.sh/do-not-disrupt=true (not so when first seen)",
		"node n1: annotation nodemaint.dev/cordoned=true",
		"node n1: annotation nodemaint.dev/maintenances=nm=Drain",
		"node n1: condition UnderMaintenance=True (Drain)",
		"node n1: cordoned",
		"node n1: taint node.kubernetes.io/out-of-service:NoExecute",
		"node n1: taint nodemaint.dev/maintenance-planned:PreferNoSchedule",
		"node n2: cordoned",
		"pod app/p: annotation nodemaint.dev/original-pod-deletion-cost=",
		"pod app/p: condition EvacuationRequest=True (NodeMaintenance)",
		"pod app/q: condition EvacuationInitiated=True (DeploymentSurge) without a request",
	}
	if got := Leftovers(dirty, base); !slices.Equal(got, want) {
		t.Errorf("leftovers:\n%q\nwant\n%q", got, want)
	}
}

// at returns a time in seconds after now.
func at(seconds float64) time.Time { return now.Add(time.Duration(seconds * float64(time.Second))) }

// readyAt returns the pod Ready since t (the kubelet's lastTransitionTime, in seconds).
func readyAt(pod *corev1.Pod, t time.Time) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(t.Truncate(time.Second))}}
	return pod
}

// notReadyAt returns the pod not Ready since t.
func notReadyAt(pod *corev1.Pod, t time.Time) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(t.Truncate(time.Second))}}
	return pod
}

// deletedAt returns the pod as the API server shows it once its deletion was requested at t with
// a grace period of 30s (the seconds of deletionTimestamp only).
func deletedAt(pod *corev1.Pod, t time.Time) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	pod.DeletionTimestamp = &metav1.Time{Time: t.Add(30 * time.Second).Truncate(time.Second)}
	return pod
}

// evictedAt returns the pod evicted at t (DisruptionTarget, grace 30s), then deleted again with
// a grace period of 0 at cut.
func evictedAt(pod *corev1.Pod, t, cut time.Time) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.NewTime(t.Truncate(time.Second))})
	pod.DeletionGracePeriodSeconds = ptr.To[int64](0)
	pod.DeletionTimestamp = &metav1.Time{Time: cut.Truncate(time.Second)}
	return pod
}

// A watch gap's relist delivers what changed in no particular order; the checker replays the gap
// from what the objects carry. Each case is a gap of a surged single-replica Deployment with a
// PodDisruptionBudget minAvailable 1: its old pod web-0, Ready before the gap, and its
// replacement web-1, created before the gap and not Ready yet. After the gap everything looks
// fine in every case (a fresh read counts web-1 Ready: what the checker judged by before), yet
// some gaps hide a breach.
func TestWatchGapReplay(t *testing.T) {
	d := newDeployment("web", 1, intstr.FromInt32(1))
	rs := newReplicaSet(d)
	old := newPod(rs, "web", 0, true)
	old.UID = "old"
	replacement := newPod(rs, "web", 1, false)
	replacement.UID = "replacement"
	both := []string{"PodDisruptionBudget app/web 0<1", "DeploymentReady app/web 0<1"}
	for _, tc := range []struct {
		name string
		// relist is what the relist delivers, in the order it does: pods, or keys of pods gone.
		relist []any
		want   []string
	}{
		{name: "old pod evicted at +2s, replacement Ready at +4s: a breach that healed in the gap",
			relist: []any{deletedAt(old, at(2)), readyAt(replacement, at(4))}, want: both},
		{name: "the same, the old pod gone without a trace (no witness): assumed gone at the gap's start",
			relist: []any{"app/web-0", readyAt(replacement, at(4))}, want: both},
		{name: "old pod evicted at +2s (DisruptionTarget), its grace cut short at +5s, replacement Ready at +4s",
			relist: []any{evictedAt(old, at(2), at(5)), readyAt(replacement, at(4))}, want: both},
		{name: "replacement Ready at +2s, old pod evicted at +4s",
			relist: []any{readyAt(replacement, at(2)), deletedAt(old, at(4))}},
		{name: "the same, delivered the other way round",
			relist: []any{deletedAt(old, at(4)), readyAt(replacement, at(2))}},
		{name: "replacement Ready and old pod evicted within the same second: joins first",
			relist: []any{deletedAt(old, at(2.7)), readyAt(replacement, at(2.2))}},
		{name: "old pod not Ready at +2s without a deletion: involuntary",
			relist: []any{notReadyAt(old, at(2)), readyAt(replacement, at(4))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(nil)
			s.deployment(d, false)
			s.replicaSet(rs, false)
			s.pdb(newPDB("web", ptr.To(intstr.FromInt32(1)), nil), false)
			s.pod(old, false, now)
			s.pod(replacement, false, now)
			s.lastEvent = now

			s.openGap()
			for _, obj := range tc.relist {
				switch o := obj.(type) {
				case string:
					s.pod(s.pods[o], true, at(10))
				case *corev1.Pod:
					s.pod(o, false, at(10))
				}
			}
			if len(s.violations) > 0 {
				t.Fatalf("violations judged on the relist's events: %v", kinds(s.violations))
			}
			// What a fresh read after the gap shows: nothing wrong.
			if healthyPods, want, _ := s.budgetCounts(s.pdbs["app/web"]); healthyPods < want {
				t.Fatalf("the case is not a hidden one: a fresh read counts %d < %d", healthyPods, want)
			}
			s.closeGap()
			if got := kinds(s.violations); !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v", got, tc.want)
			}
			for _, v := range s.violations {
				if !v.AfterWatchGap {
					t.Errorf("violation %s: not reconstructed after the gap", v)
				}
				if v.Evidence == "" {
					t.Errorf("violation %s: no evidence", v)
				}
				if v.Time.Before(now) || v.Time.After(at(10)) {
					t.Errorf("violation %s: dated %v, want inside the gap (%v to %v)", v, v.Time, now, at(10))
				}
			}
			// Once the gap is closed, events are judged as they come again.
			s.pod(readyAt(replacement, at(4)), true, at(11))
			if len(s.violations) == len(tc.want) {
				t.Errorf("deleting the last Ready pod after the gap: no violation")
			}
		})
	}
}

// A budget over three pods of a StatefulSet, maxUnavailable 1: inside the gap db-0 was replaced
// by a new pod of the same name, not Ready yet, and then db-1 was evicted; a fresh read after
// the gap counts 2 of the 2 wanted (db-0 Ready again), the replay finds db-1's eviction left 1.
func TestWatchGapReplayStatefulSet(t *testing.T) {
	s := newState(nil)
	s.statefulSet(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3))}}, false)
	s.pdb(newPDB("db", nil, ptr.To(intstr.FromInt32(1))), false)
	var pods []*corev1.Pod
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%d", i), Labels: map[string]string{"app": "db"},
				UID:             types.UID(fmt.Sprintf("uid-%d", i)),
				OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		pods = append(pods, pod)
		s.pod(pod, false, now)
	}
	s.lastEvent = now
	s.openGap()
	db0 := readyAt(pods[0], at(6))
	db0.UID = "uid-0-again"
	s.pod(db0, false, at(10))
	s.pod(deletedAt(pods[1], at(3)), false, at(10))
	s.closeGap()
	want := []string{"PodDisruptionBudget app/db 1<2"}
	if got := kinds(s.violations); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
}
