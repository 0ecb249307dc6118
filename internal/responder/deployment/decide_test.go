package deployment

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

var now = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	state := func(original, surge int32, age time.Duration) *surgepolicy.State {
		return &surgepolicy.State{OriginalReplicas: original, Surge: surge, StartTime: metav1.NewMicroTime(now.Add(-age))}
	}
	for name, tc := range map[string]struct {
		d           *appsv1.Deployment
		extraRS     bool
		rsFailure   bool
		autoscaled  bool
		pods        []*corev1.Pod
		wantAnswers map[string]string // pod → "True/Reason", "False/Reason" or "withdraw"
		wantMark    []string
		wantUnmark  []string
		wantScale   *scaleChange
		wantDrop    bool
		wantRequeue bool
		// wantSurges are the outcomes nodemaint_responder_surges_total counts (surgeOutcomes).
		wantSurges []string
	}{
		"nothing requested": {
			d:    newDeployment(3, 1),
			pods: []*corev1.Pod{pod("a"), pod("b"), pod("c")},
		},
		"first wave: accepts and marks all, surges maxSurge": {
			d:           newDeployment(3, 2),
			pods:        []*corev1.Pod{pod("a", requested(3)), pod("b", requested(1)), pod("c", requested(2))},
			wantAnswers: map[string]string{"a": "True/DeploymentSurge", "b": "True/DeploymentSurge", "c": "True/DeploymentSurge"},
			wantMark:    []string{"a", "b", "c"},
			wantScale:   &scaleChange{replicas: 5, surge: state(3, 2, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"accepted and marked before a crash: the wave starts, no pod written again": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(2), accepted, withMark), pod("c")},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"accepted, not marked (a rollback's scale-down, an older responder): marked with the wave": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(5), accepted), pod("b", requested(1), accepted, withMark), pod("c")},
			wantMark:    []string{"a"},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"wave not full, a request just came: accepts and marks, waits for more": {
			d:           newDeployment(3, 2),
			pods:        []*corev1.Pod{pod("a", requested(0)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "True/DeploymentSurge"},
			wantMark:    []string{"a"},
			wantRequeue: true,
		},
		"wave not full, requests stopped coming: surges": {
			d:           newDeployment(3, 2),
			pods:        []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "True/DeploymentSurge"},
			wantMark:    []string{"a"},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"not steady yet: accepts and marks, waits to surge": {
			d:           withStatus(newDeployment(3, 1), func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 0 }),
			pods:        []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "True/DeploymentSurge"},
			wantMark:    []string{"a"},
		},
		"requested mid-surge: accepted and marked, for this surge's scale-back or a later wave": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(0)), pod("c"), pod("s", created(5))},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge"},
			wantMark:    []string{"b"},
			wantRequeue: true,
		},
		"requested mid-surge below maxSurge, requests stopped coming: the surge grows": {
			d:           surging(newDeployment(3, 3), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", requested(9), accepted, withMark), pod("b", requested(2)), pod("c", requested(3)), pod("s", created(5))},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge", "c": "True/DeploymentSurge"},
			wantMark:    []string{"b", "c"},
			wantScale:   &scaleChange{replicas: 6, surge: state(3, 3, 10*time.Second)},
			wantRequeue: true,
		},
		"requested mid-surge below maxSurge, a request just came: waits for more before the surge grows": {
			d:           surging(newDeployment(3, 3), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", requested(9), accepted, withMark), pod("b", requested(0)), pod("c"), pod("s", created(5))},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge"},
			wantMark:    []string{"b"},
			wantRequeue: true,
		},
		"requested mid-surge beyond maxSurge: the surge grows to maxSurge": {
			d: surging(newDeployment(4, 2), state(4, 1, 10*time.Second)),
			pods: []*corev1.Pod{pod("a", requested(9), accepted, withMark), pod("b", requested(2)), pod("c", requested(2)), pod("d"),
				pod("s", created(5))},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge", "c": "True/DeploymentSurge"},
			wantMark:    []string{"b", "c"},
			wantScale:   &scaleChange{replicas: 6, surge: state(4, 2, 10*time.Second)},
			wantRequeue: true,
		},
		"withdrawn mid-surge, another pod still to evacuate: unmarked, the surge completes": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", accepted, withMark), pod("b", requested(1), accepted, withMark), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantAnswers: map[string]string{"a": "withdraw"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"completed"},
		},
		"an evacuated pod removed by someone else mid-surge: rolls back": {
			d:          surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:       []*corev1.Pod{pod("a", requested(1), accepted, withMark, terminating), pod("b"), pod("c"), pod("s", created(5))},
			wantMark:   []string{"s"},
			wantScale:  &scaleChange{replicas: 3},
			wantSurges: []string{"rolled_back"},
		},
		"rolled back, its scale-down pending: a pod still asked to leave is not marked again": {
			d: newDeployment(3, 1),
			pods: []*corev1.Pod{pod("a", requested(1), accepted), pod("b", requested(0)), pod("c"), pod("d"),
				pod("s", created(5), withMark)},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge"},
		},
		"rolled back, scale-down done: marked again, the next wave starts": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted), pod("c"), pod("d")},
			wantMark:    []string{"a"},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"surge not available yet: waits": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantRequeue: true,
			wantSurges:  nil,
		},
		"surge available: scales back": {
			d:          surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:       []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantScale:  &scaleChange{replicas: 3},
			wantSurges: []string{"completed"},
		},
		"withdrawn mid-surge: the surge pod goes, not the evacuated one": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantAnswers: map[string]string{"a": "withdraw"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"rolled_back"},
		},
		"timed out: declines for good and rolls back": {
			d:           surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(2), accepted), pod("c"), pod("s", created(170), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut", "b": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"minReadySeconds extends the bound": {
			d: surging(withMinReady(newDeployment(3, 1), 120), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(170))},
			wantRequeue: true,
		},
		"slow but moving: a replacement scheduled within the timeout keeps the surge": {
			d: surging(newDeployment(4, 2), state(4, 2, 5*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(6), accepted, withMark), pod("b", requested(6), accepted, withMark), pod("c"), pod("d"),
				pod("s1", created(290), since(corev1.PodScheduled, 200), since(corev1.PodReady, 180)),
				pod("s2", created(290), since(corev1.PodScheduled, 60))},
			wantRequeue: true,
		},
		"replacement starting on its node: waits for the Deployment's progress deadline": {
			d: surging(newDeployment(3, 1), state(3, 1, 9*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(10), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(530), onNode, since(corev1.PodScheduled, 530))},
			wantRequeue: true,
		},
		"replacement starting past the progress deadline: gives up": {
			d: surging(newDeployment(3, 1), state(3, 1, 11*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(12), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(650), onNode, since(corev1.PodScheduled, 650), since(corev1.PodInitialized, 620))},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"a shorter progressDeadlineSeconds leaves the surge timeout": {
			d: surging(withProgressDeadline(newDeployment(3, 1), 60), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(4), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(170), onNode, since(corev1.PodScheduled, 170))},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"replacement whose image does not pull: the surge timeout": {
			d: surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(4), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(170), onNode, since(corev1.PodScheduled, 170), waiting("ImagePullBackOff"))},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"one replacement starting, one not placed: the surge timeout": {
			d: surging(newDeployment(4, 2), state(4, 2, 5*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(6), accepted, withMark), pod("b", requested(6), accepted, withMark), pod("c"), pod("d"),
				pod("s1", created(290), onNode, since(corev1.PodScheduled, 290)),
				pod("s2", created(290), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut", "b": "False/SurgeTimedOut"},
			wantMark:    []string{"s1", "s2"},
			wantUnmark:  []string{"a", "b"},
			wantScale:   &scaleChange{replicas: 4},
			wantSurges:  []string{"timed_out"},
		},
		"replacements not created yet on a busy cluster: waits for the progress deadline": {
			d:           surging(newDeployment(3, 1), state(3, 1, 5*time.Minute)),
			pods:        []*corev1.Pod{pod("a", requested(6), accepted, withMark), pod("b"), pod("c")},
			wantRequeue: true,
		},
		"replacement created, not placed yet, nothing wrong: waits for the progress deadline": {
			d: surging(newDeployment(3, 1), state(3, 1, 5*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(6), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(290))},
			wantRequeue: true,
		},
		"the ReplicaSet fails to create the replacements: the surge timeout": {
			d:           surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			rsFailure:   true,
			pods:        []*corev1.Pod{pod("a", requested(4), accepted, withMark), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"progress long ago: gives up": {
			d: surging(newDeployment(4, 2), state(4, 2, 5*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(6), accepted, withMark), pod("b", requested(6), accepted, withMark), pod("c"), pod("d"),
				pod("s1", created(290), since(corev1.PodScheduled, 200), since(corev1.PodReady, 180)),
				pod("s2", created(290), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut", "b": "False/SurgeTimedOut"},
			wantMark:    []string{"s1", "s2"},
			wantUnmark:  []string{"a", "b"},
			wantScale:   &scaleChange{replicas: 4},
			wantSurges:  []string{"timed_out"},
		},
		"progress of pods the surge did not create does not count": {
			d: surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", since(corev1.PodReady, 10)), pod("c"),
				pod("s", created(170), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"scaled by someone during the surge: keeps their count and the marks": {
			d:          surging(withReplicas(newDeployment(3, 1), 6), state(3, 1, 10*time.Second)),
			pods:       []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantDrop:   true,
			wantSurges: []string{"overridden"},
		},
		"paused mid-surge: rolls back and declines": {
			d:           surging(withPaused(newDeployment(3, 1)), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantAnswers: map[string]string{"a": "False/DeploymentPaused"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &scaleChange{replicas: 3},
			wantSurges:  []string{"rolled_back"},
		},
		"scale-down pending: marks stay": {
			d:    newDeployment(3, 1),
			pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c"), pod("s", withMark)},
		},
		"leftover marks go once settled": {
			d:          newDeployment(3, 1),
			pods:       []*corev1.Pod{pod("a"), pod("b"), pod("s", withMark)},
			wantUnmark: []string{"s"},
		},
		"terminating evacuated pods do not count": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark, terminating), pod("b", requested(2)), pod("c"), pod("s")},
			wantAnswers: map[string]string{"b": "True/DeploymentSurge"},
			wantMark:    []string{"b"},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"timed out pods are not accepted again": {
			d:    newDeployment(3, 1),
			pods: []*corev1.Pod{pod("a", requested(1), declined(surgepolicy.ReasonSurgeTimedOut)), pod("b"), pod("c")},
		},
		"declined for a passing reason: accepted again": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(1), declined(surgepolicy.ReasonPaused)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "True/DeploymentSurge"},
			wantMark:    []string{"a"},
			wantScale:   &scaleChange{replicas: 4, surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"maxSurge 0: declined": {
			d:           newDeployment(3, 0),
			pods:        []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "False/MaxSurgeZero"},
		},
		"autoscaled: declined and unmarked": {
			d:           newDeployment(3, 1),
			autoscaled:  true,
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "False/HorizontalPodAutoscaler"},
			wantUnmark:  []string{"a"},
		},
		"rollout in progress: declined": {
			d:           newDeployment(3, 1),
			extraRS:     true,
			pods:        []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "False/RolloutInProgress"},
		},
		"replicas 0: no answer": {
			d:    withReplicas(newDeployment(0, 1), 0),
			pods: []*corev1.Pod{pod("a", requested(1), terminating)},
		},
		"request withdrawn: answer withdrawn": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", declined(surgepolicy.ReasonPaused)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "withdraw"},
		},
		"accepted request withdrawn before its wave: answer withdrawn and unmarked": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", accepted, withMark), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "withdraw"},
			wantUnmark:  []string{"a"},
		},
		"invalid surge state: dropped, replicas left": {
			d:    withAnnotation(newDeployment(3, 1), evacuation.SurgeAnnotation, "{"),
			pods: []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			// Nothing is requested: no answers.
			wantDrop:   true,
			wantSurges: []string{"invalid"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := input{deployment: tc.d, replicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)}, pods: tc.pods,
				autoscaled: tc.autoscaled, now: now, surgeTimeout: 2 * time.Minute}
			if tc.extraRS {
				in.replicaSets = append(in.replicaSets, replicaSet("old", 1))
			}
			if tc.rsFailure {
				in.replicaSets[0].Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure,
					Status: corev1.ConditionTrue, Reason: "FailedCreate"}}
			}
			p := decide(in)
			got := map[string]string{}
			for _, a := range p.answers {
				got[a.pod.Name] = "withdraw"
				if a.status != "" {
					got[a.pod.Name] = string(a.status) + "/" + a.reason
				}
			}
			if tc.wantAnswers == nil {
				tc.wantAnswers = map[string]string{}
			}
			if !equalMaps(got, tc.wantAnswers) {
				t.Errorf("answers = %v, want %v", got, tc.wantAnswers)
			}
			if m := podNamesOf(p.mark); !slices.Equal(m, tc.wantMark) {
				t.Errorf("mark = %v, want %v", m, tc.wantMark)
			}
			if u := podNamesOf(p.unmark); !slices.Equal(u, tc.wantUnmark) {
				t.Errorf("unmark = %v, want %v", u, tc.wantUnmark)
			}
			switch {
			case (p.scale == nil) != (tc.wantScale == nil):
				t.Errorf("scale = %+v, want %+v", p.scale, tc.wantScale)
			case p.scale != nil && (p.scale.replicas != tc.wantScale.replicas || p.scale.surge.String() != tc.wantScale.surge.String()):
				t.Errorf("scale = %d %s, want %d %s", p.scale.replicas, p.scale.surge, tc.wantScale.replicas, tc.wantScale.surge)
			}
			if p.dropSurge != tc.wantDrop {
				t.Errorf("dropSurge = %t, want %t", p.dropSurge, tc.wantDrop)
			}
			if o := surgeOutcomes(p.events); !slices.Equal(o, tc.wantSurges) {
				t.Errorf("surge outcomes = %v, want %v", o, tc.wantSurges)
			}
			if (p.requeueAfter > 0) != tc.wantRequeue {
				t.Errorf("requeueAfter = %v, want requeue %t", p.requeueAfter, tc.wantRequeue)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	rs := replicaSet("rs", 3)
	pods := []*corev1.Pod{pod("a", requested(1)), pod("b", requested(2)), pod("c"), pod("d", requested(1), terminating)}
	got := markers(rs, pods, true, map[string]string{evacuation.SurgeAnnotation: "{}"}, false)
	want := map[string]*string{
		evacuation.ReplicasToEvacuateAnnotation:           ptr.To("2"),
		evacuation.EvacuationReadyAnnotation:              ptr.To("true"),
		evacuation.DeploymentReplicasToEvacuateAnnotation: nil,
	}
	if len(got) != len(want) {
		t.Fatalf("markers = %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || ptr.Deref(g, "<nil>") != ptr.Deref(v, "<nil>") {
			t.Errorf("markers[%s] = %v, want %v", k, ptr.Deref(g, "<nil>"), ptr.Deref(v, "<nil>"))
		}
	}
	// More steps to come: the copy of the Deployment's count stays until the end.
	if got := markers(rs, pods, true, nil, true); len(got) != 2 {
		t.Errorf("markers with more steps = %v, want the counts only, copies left alone", got)
	}
	// Nothing requested, not ready, nothing more to do: every marker removed.
	for k, v := range markers(rs, []*corev1.Pod{pod("c")}, false, nil, false) {
		if v != nil {
			t.Errorf("markers[%s] = %s, want removed", k, *v)
		}
	}
}

func rolling(maxSurge intstr.IntOrString) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge},
	}
}

// newDeployment is a steady Deployment: every replica updated and available.
func newDeployment(replicas, maxSurge int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Strategy: rolling(intstr.FromInt32(maxSurge))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

func withStatus(d *appsv1.Deployment, f func(*appsv1.DeploymentStatus)) *appsv1.Deployment {
	f(&d.Status)
	return d
}

func withReplicas(d *appsv1.Deployment, n int32) *appsv1.Deployment {
	d.Spec.Replicas = ptr.To(n)
	return d
}

func withPaused(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Paused = true
	return d
}

func withMinReady(d *appsv1.Deployment, seconds int32) *appsv1.Deployment {
	d.Spec.MinReadySeconds = seconds
	return d
}

func withAnnotation(d *appsv1.Deployment, k, v string) *appsv1.Deployment {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[k] = v
	return d
}

// surging puts a surge in progress on the Deployment, its status at the surge's generation
// (whether the surge is available, its pods say).
func surging(d *appsv1.Deployment, s *surgepolicy.State) *appsv1.Deployment {
	withAnnotation(d, evacuation.SurgeAnnotation, s.String())
	if *d.Spec.Replicas == s.OriginalReplicas {
		d.Spec.Replicas = ptr.To(s.OriginalReplicas + s.Surge)
	}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas}
	return d
}

func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.ReplicaSetStatus{Replicas: replicas},
	}
}

// pod is a pod of the ReplicaSet "rs", Ready for an hour unless created says otherwise.
func pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}},
	}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// requested adds an evacuation request made minutesAgo.
func requested(minutesAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: evacuation.ReasonNodeMaintenance, LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(minutesAgo) * time.Minute))})
	}
}

func accepted(p *corev1.Pod) {
	evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge})
}

func declined(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: reason})
	}
}

func withMark(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[evacuation.OriginalDeletionCostAnnotation] = ""
	p.Annotations[corev1.PodDeletionCost] = "-2147483648"
}

func terminating(p *corev1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(now))
}

// created sets the pod's creation secondsAgo: a pod not Ready yet (since adds conditions).
func created(secondsAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Duration(secondsAgo) * time.Second))
		evacuation.RemoveCondition(p, corev1.PodReady)
	}
}

// unschedulable marks the pod as one the scheduler found no node for.
func unschedulable(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
}

// onNode binds the pod to a node.
func onNode(p *corev1.Pod) { p.Spec.NodeName = "node-1" }

// waiting makes the pod's container wait for reason.
func waiting(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
}

func withProgressDeadline(d *appsv1.Deployment, seconds int32) *appsv1.Deployment {
	d.Spec.ProgressDeadlineSeconds = ptr.To(seconds)
	return d
}

// since sets the pod's condition True since secondsAgo.
func since(t corev1.PodConditionType, secondsAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.RemoveCondition(p, t)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(secondsAgo) * time.Second))})
	}
}

func podNamesOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
