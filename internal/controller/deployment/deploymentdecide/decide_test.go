package deploymentdecide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func TestDecide(t *testing.T) {
	state := func(original, surge int32, age time.Duration) *surgepolicy.State {
		return &surgepolicy.State{OriginalReplicas: original, Surge: surge, StartTime: metav1.NewMicroTime(now.Add(-age)), UID: "d"}
	}
	for name, tc := range map[string]struct {
		d           *appsv1.Deployment
		extraRS     bool
		rsFailure   bool
		autoscalers int
		pods        []*corev1.Pod
		wantAnswers map[string]string // pod → "True/Reason", "False/Reason" or "withdraw"
		wantMark    []string
		wantUnmark  []string
		wantScale   *ScaleChange
		wantDrop    bool
		wantRequeue bool
		// wantSurges are the outcomes nodemaint_responder_surges_total counts (SurgeOutcomes).
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
			wantScale:   &ScaleChange{Replicas: 5, Surge: state(3, 2, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"accepted and marked before a crash: the wave starts, no pod written again": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(2), accepted, withMark), pod("c")},
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"accepted, not marked (a rollback's scale-down, an older responder): marked with the wave": {
			d:           newDeployment(3, 1),
			pods:        []*corev1.Pod{pod("a", requested(5), accepted), pod("b", requested(1), accepted, withMark), pod("c")},
			wantMark:    []string{"a"},
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
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
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
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
			wantScale:   &ScaleChange{Replicas: 6, Surge: state(3, 3, 10*time.Second)},
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
			wantScale:   &ScaleChange{Replicas: 6, Surge: state(4, 2, 10*time.Second)},
			wantRequeue: true,
		},
		"withdrawn mid-surge, another pod still to evacuate: unmarked, the surge completes": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", accepted, withMark), pod("b", requested(1), accepted, withMark), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantAnswers: map[string]string{"a": "withdraw"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
			wantSurges:  []string{"completed"},
		},
		"an evacuated pod removed by someone else mid-surge: rolls back": {
			d:          surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:       []*corev1.Pod{pod("a", requested(1), accepted, withMark, terminating), pod("b"), pod("c"), pod("s", created(5))},
			wantMark:   []string{"s"},
			wantScale:  &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
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
			wantScale:  &ScaleChange{Replicas: 3},
			wantSurges: []string{"completed"},
		},
		"withdrawn mid-surge: the surge pod goes, not the evacuated one": {
			d:           surging(newDeployment(3, 1), state(3, 1, 10*time.Second)),
			pods:        []*corev1.Pod{pod("a", accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantAnswers: map[string]string{"a": "withdraw"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
			wantSurges:  []string{"rolled_back"},
		},
		"timed out: declines for good and rolls back": {
			d:           surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods:        []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(2), accepted), pod("c"), pod("s", created(170), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut", "b": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"a shorter progressDeadlineSeconds leaves the surge timeout": {
			d: surging(withProgressDeadline(newDeployment(3, 1), 60), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(4), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(170), onNode, since(corev1.PodScheduled, 170))},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
			wantSurges:  []string{"timed_out"},
		},
		"replacement whose image does not pull: the surge timeout": {
			d: surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(4), accepted, withMark), pod("b"), pod("c"),
				pod("s", created(170), onNode, since(corev1.PodScheduled, 170), waiting("ImagePullBackOff"))},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 4},
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
			wantScale:   &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 4},
			wantSurges:  []string{"timed_out"},
		},
		"progress of pods the surge did not create does not count": {
			d: surging(newDeployment(3, 1), state(3, 1, 3*time.Minute)),
			pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", since(corev1.PodReady, 10)), pod("c"),
				pod("s", created(170), unschedulable)},
			wantAnswers: map[string]string{"a": "False/SurgeTimedOut"},
			wantMark:    []string{"s"},
			wantUnmark:  []string{"a"},
			wantScale:   &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 3},
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
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
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
			wantScale:   &ScaleChange{Replicas: 4, Surge: state(3, 1, 0)},
			wantRequeue: true,
			wantSurges:  []string{"started"},
		},
		"maxSurge 0: declined": {
			d:           newDeployment(3, 0),
			pods:        []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
			wantAnswers: map[string]string{"a": "False/MaxSurgeZero"},
		},
		"two autoscalers: declined and unmarked": {
			d:           newDeployment(3, 1),
			autoscalers: 2,
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
			in := Input{Deployment: tc.d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)}, Pods: tc.pods,
				Now: now, SurgeTimeout: 2 * time.Minute}
			for i := range tc.autoscalers {
				in.Autoscalers = append(in.Autoscalers, hpa(fmt.Sprintf("hpa%d", i), "web", 1, 10, nil))
			}
			if tc.extraRS {
				in.ReplicaSets = append(in.ReplicaSets, replicaSet("old", 1))
			}
			if tc.rsFailure {
				in.ReplicaSets[0].Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure,
					Status: corev1.ConditionTrue, Reason: "FailedCreate"}}
			}
			p := Decide(in)
			got := map[string]string{}
			for _, a := range p.Answers {
				got[a.Pod.Name] = "withdraw"
				if a.Status != "" {
					got[a.Pod.Name] = string(a.Status) + "/" + a.Reason
				}
			}
			if tc.wantAnswers == nil {
				tc.wantAnswers = map[string]string{}
			}
			if !equalMaps(got, tc.wantAnswers) {
				t.Errorf("answers = %v, want %v", got, tc.wantAnswers)
			}
			if m := podNamesOf(p.Mark); !slices.Equal(m, tc.wantMark) {
				t.Errorf("mark = %v, want %v", m, tc.wantMark)
			}
			if u := podNamesOf(p.Unmark); !slices.Equal(u, tc.wantUnmark) {
				t.Errorf("unmark = %v, want %v", u, tc.wantUnmark)
			}
			switch {
			case (p.Scale == nil) != (tc.wantScale == nil):
				t.Errorf("scale = %+v, want %+v", p.Scale, tc.wantScale)
			case p.Scale != nil && (p.Scale.Replicas != tc.wantScale.Replicas || p.Scale.Surge.String() != tc.wantScale.Surge.String()):
				t.Errorf("scale = %d %s, want %d %s", p.Scale.Replicas, p.Scale.Surge, tc.wantScale.Replicas, tc.wantScale.Surge)
			}
			if p.DropSurge != tc.wantDrop {
				t.Errorf("dropSurge = %t, want %t", p.DropSurge, tc.wantDrop)
			}
			if o := SurgeOutcomes(p.Events); !slices.Equal(o, tc.wantSurges) {
				t.Errorf("surge outcomes = %v, want %v", o, tc.wantSurges)
			}
			if (p.RequeueAfter > 0) != tc.wantRequeue {
				t.Errorf("requeueAfter = %v, want requeue %t", p.RequeueAfter, tc.wantRequeue)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	rs := replicaSet("rs", 3)
	pods := []*corev1.Pod{pod("a", requested(1)), pod("b", requested(2)), pod("c"), pod("d", requested(1), terminating)}
	got := marks.Markers(rs, pods, true, map[string]string{evacuation.SurgeAnnotation: "{}"}, false)
	want := map[string]*string{
		evacuation.ReplicasToEvacuateAnnotation:           ptr.To("2"),
		evacuation.EvacuationReadyAnnotation:              ptr.To("true"),
		evacuation.DeploymentReplicasToEvacuateAnnotation: nil,
		evacuation.SurgeRevertedAnnotation:                nil,
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
	if got := marks.Markers(rs, pods, true, nil, true); len(got) != 2 {
		t.Errorf("markers with more steps = %v, want the counts only, copies left alone", got)
	}
	// Nothing requested, not ready, nothing more to do: every marker removed.
	for k, v := range marks.Markers(rs, []*corev1.Pod{pod("c")}, false, nil, false) {
		if v != nil {
			t.Errorf("markers[%s] = %s, want removed", k, *v)
		}
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
