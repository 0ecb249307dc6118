package deploymentdecide

import (
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestRecordsAreNodemaints: the surge record on a Deployment and the record of raised bounds on
// its autoscaler are honoured only when they name the object they are on (its UID), and only
// within what nodemaint itself could have set. Whoever may patch an autoscaler may write its
// record: such a record alone never scales the Deployment below its count, to 0, or below the
// autoscaler's own minReplicas. A record of the previous version (no UID) is honoured only for
// the surge in flight on the Deployment, and on the autoscaler only to restore its own bounds.
func TestRecordsAreNodemaints(t *testing.T) {
	surge := func(original, k int32, uid string) *surgepolicy.State {
		return &surgepolicy.State{OriginalReplicas: original, Surge: k, StartTime: metav1.NewMicroTime(now.Add(-10 * time.Second)), UID: typesUID(uid)}
	}
	// forgedBounds is a record of raised bounds claiming a surge from original by k, written on
	// an autoscaler of minReplicas and maxReplicas min, max (which it claims it raised from 1).
	forgedBounds := func(uid string, s *surgepolicy.State, minReplicas int32) *surgepolicy.Bounds {
		return &surgepolicy.Bounds{UID: typesUID(uid), Deployment: "web", MinReplicas: ptr.To[int32](1), MaxReplicas: minReplicas,
			SetMinReplicas: ptr.To(minReplicas), Surge: s}
	}
	threePods := func() []*corev1.Pod { return []*corev1.Pod{pod("a"), pod("b"), pod("c")} }
	for name, tc := range map[string]struct {
		surgeRecord *surgepolicy.State // on the Deployment of 3 replicas (maxSurge 1)
		maxSurge    int32
		hpas        []*autoscalingv2.HorizontalPodAutoscaler
		pods        []*corev1.Pod
		wantScale   *int32 // nil: no scale
		wantDrop    bool
		wantEvents  []EventReason
	}{
		"the Deployment's record of a surge to 3 from 0: not nodemaint's (none surges nothing), dropped, the count stays": {
			surgeRecord: surge(0, 3, "d"), maxSurge: 3, pods: threePods(),
			wantDrop: true, wantEvents: []EventReason{InvalidSurgeState},
		},
		"the Deployment's record names another object's UID: dropped, the count stays": {
			surgeRecord: surge(2, 1, "elsewhere"), pods: threePods(),
			wantDrop: true, wantEvents: []EventReason{InvalidSurgeState},
		},
		"the Deployment's record, nobody asked: rolled back to its count": {
			surgeRecord: surge(2, 1, "d"), pods: threePods(),
			wantScale: ptr.To[int32](2), wantEvents: []EventReason{SurgeRolledBack},
		},
		"the previous version's record (no UID) of a surge in flight: rolled back as nodemaint's": {
			surgeRecord: surge(2, 1, ""), pods: threePods(),
			wantScale: ptr.To[int32](2), wantEvents: []EventReason{SurgeRolledBack},
		},
		"the Deployment's record of a surge larger than maxSurge: the scale-back bounded by maxSurge": {
			surgeRecord: surge(1, 2, "d"), pods: threePods(),
			wantScale: ptr.To[int32](2), wantEvents: []EventReason{SurgeRolledBack, ScaleBackBounded},
		},
		"the Deployment's record below its autoscaler's own minReplicas: the scale-back stops there": {
			surgeRecord: surge(2, 1, "d"), hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 5, nil)}, pods: threePods(),
			wantScale: ptr.To[int32](3), wantEvents: []EventReason{SurgeRolledBack, ScaleBackBounded},
		},
		"an autoscaler's forged record of a surge from 0, nobody asked: never adopted; its bounds are its own": {
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-web", surge(0, 3, "d"), 3))}, pods: threePods(),
			wantEvents: []EventReason{InvalidBoundsRecord},
		},
		"an autoscaler's forged record of a surge from 2, nobody asked: not adopted, nothing scaled down": {
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-web", surge(2, 1, "d"), 3))}, pods: threePods(),
			wantEvents: []EventReason{AutoscalerRestored},
		},
		"an autoscaler's record naming another autoscaler's UID, pods asked: not adopted, removed, bounds left": {
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-other", surge(2, 1, "d"), 3))},
			pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}, wantEvents: []EventReason{InvalidBoundsRecord},
		},
		// Not adopted, the Deployment's count is its own: a wave starts from it.
		"an autoscaler's record naming another Deployment's surge (UID), pods asked: not adopted, a wave starts from 3": {
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-web", surge(2, 1, "another"), 3))},
			pods:      []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")},
			wantScale: ptr.To[int32](4), wantEvents: []EventReason{SurgeStarted, AutoscalerRaised},
		},
		"the previous version's record on the autoscaler (no UID), pods asked: not adopted, a wave starts from 3": {
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{legacyBounds(hpa("web", "web", 3, 3, forgedBounds("", surge(2, 1, "d"), 3)))},
			pods:      []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")},
			wantScale: ptr.To[int32](4), wantEvents: []EventReason{SurgeStarted, AutoscalerRaised},
		},
		"the previous version's record on the autoscaler (no UID), nothing asked: its bounds restored": {
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{legacyBounds(hpa("web", "web", 3, 3, forgedBounds("", surge(2, 1, "d"), 3)))},
			pods: threePods(), wantEvents: []EventReason{AutoscalerRestored},
		},
		"an autoscaler's record naming a surge beyond maxSurge, pods asked: not adopted, a wave starts from 3": {
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-web", surge(1, 2, "d"), 3))},
			pods:      []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b", requested(1), accepted, withMark), pod("c")},
			wantScale: ptr.To[int32](4), wantEvents: []EventReason{SurgeStarted, AutoscalerRaised},
		},
		// A record nodemaint cannot tell from its own: whoever may patch the autoscaler could as
		// well set its bounds to 2 and have the autoscaler scale the Deployment so. Within that,
		// and only with pods asked to leave, which it evacuates.
		"an autoscaler's record in order, pods asked: adopted (nodemaint's own, as far as anything tells), completed": {
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, forgedBounds("hpa-web", surge(2, 1, "d"), 3))},
			pods:      []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")},
			wantScale: ptr.To[int32](2), wantEvents: []EventReason{SurgeCompleted},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDeployment(3, max(tc.maxSurge, 1))
			if tc.surgeRecord != nil {
				withAnnotation(d, evacuation.SurgeAnnotation, tc.surgeRecord.String())
			}
			in := Input{Deployment: d, ReplicaSets: replicaSets(3), Pods: tc.pods, Autoscalers: tc.hpas, Now: now, SurgeTimeout: 2 * time.Minute}
			p := Decide(in)
			switch {
			case (p.Scale == nil) != (tc.wantScale == nil):
				t.Errorf("scale = %+v, want %v", p.Scale, ptr.Deref(tc.wantScale, -1))
			case p.Scale != nil && p.Scale.Replicas != *tc.wantScale:
				t.Errorf("scale to %d, want %d", p.Scale.Replicas, *tc.wantScale)
			}
			if p.DropSurge != tc.wantDrop {
				t.Errorf("dropSurge = %t, want %t", p.DropSurge, tc.wantDrop)
			}
			var got []EventReason
			for _, e := range p.Events {
				if e.Reason != EvacuationAccepted {
					got = append(got, e.Reason)
				}
			}
			if !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events %v, want %v", got, tc.wantEvents)
			}
		})
	}
}

// TestRevertedSurges: someone sets the Deployment's spec.replicas back to its count before the
// surge (a GitOps engine's self-heal). The first time, their count stays and is counted in the
// Deployment's record, written with the surge record's removal; the next wave starts; the
// second time, the pods asked to leave are declined (ReplicasReverted), so eviction moves them,
// and no wave starts again. The count goes once nothing is asked to leave; a count that is not
// nodemaint's (another UID) is removed and counts for nothing.
func TestRevertedSurges(t *testing.T) {
	asked := func() []*corev1.Pod {
		return []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b")}
	}
	reverted := func(d string, n int32) string {
		return (&surgepolicy.Reverted{UID: typesUID(d), Count: n, Replicas: 2}).String()
	}
	surgingTo3 := func() *corev1.Pod { return pod("s", created(1)) }
	for name, tc := range map[string]struct {
		reverted     string // the Deployment's count of surges set back
		surge        bool   // a surge record from 2 to 3, the Deployment set back to 2
		pods         []*corev1.Pod
		wantReverted int32 // the count written; 0: none written
		wantDropRev  bool
		wantAnswer   string // a's answer written, "" none
		wantEvents   []EventReason
		wantWave     bool
	}{
		"the first revert: counted, the surge record dropped, the count kept": {
			surge: true, pods: append(asked(), surgingTo3()), wantReverted: 1, wantEvents: []EventReason{ScaledDuringSurge},
		},
		"one revert counted: the next wave starts": {
			reverted: reverted("d", 1), pods: asked(), wantWave: true, wantEvents: []EventReason{SurgeStarted},
		},
		"the second revert: counted, the pods declined": {
			reverted: reverted("d", 1), surge: true, pods: append(asked(), surgingTo3()), wantReverted: 2,
			wantAnswer: "False/" + surgepolicy.ReasonReplicasReverted, wantEvents: []EventReason{ScaledDuringSurge, ReplicasReverted, EvacuationDeclined},
		},
		"two reverts counted: declined, no wave": {
			reverted: reverted("d", 2), pods: asked(), wantAnswer: "False/" + surgepolicy.ReasonReplicasReverted, wantEvents: []EventReason{EvacuationDeclined},
		},
		"nothing asked to leave any more: the count goes": {
			reverted: reverted("d", 2), pods: []*corev1.Pod{pod("b"), pod("c")}, wantDropRev: true,
		},
		"a count naming another UID: removed, counts for nothing, the wave starts": {
			reverted: reverted("elsewhere", 2), pods: asked(), wantDropRev: true, wantWave: true, wantEvents: []EventReason{InvalidSurgeState, SurgeStarted},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDeployment(2, 1)
			if tc.surge {
				surging(d, &surgepolicy.State{OriginalReplicas: 2, Surge: 1, StartTime: metav1.NewMicroTime(now.Add(-time.Second))})
				d.Spec.Replicas = ptr.To[int32](2) // set back
			}
			if tc.reverted != "" {
				withAnnotation(d, evacuation.SurgeRevertedAnnotation, tc.reverted)
			}
			in := Input{Deployment: d, ReplicaSets: replicaSets(2), Pods: tc.pods, Now: now, SurgeTimeout: 2 * time.Minute}
			p := Decide(in)
			if got := ptr.Deref(p.Reverted, surgepolicy.Reverted{}).Count; got != tc.wantReverted {
				t.Errorf("reverted written %+v, want count %d", p.Reverted, tc.wantReverted)
			}
			if p.Reverted != nil && p.Reverted.UID != d.UID {
				t.Errorf("reverted written for UID %s, want the Deployment's %s", p.Reverted.UID, d.UID)
			}
			if p.DropReverted != tc.wantDropRev {
				t.Errorf("dropReverted = %t, want %t", p.DropReverted, tc.wantDropRev)
			}
			answer := ""
			for _, a := range p.Answers {
				if a.Pod.Name == "a" {
					answer = string(a.Status) + "/" + a.Reason
					if a.Status == corev1.ConditionFalse && !containsAll(a.Message(), "something reverts its replicas", "GitOps") {
						t.Errorf("the decline says %q", a.Message())
					}
				}
			}
			if answer != tc.wantAnswer {
				t.Errorf("a's answer %q, want %q", answer, tc.wantAnswer)
			}
			if wave := p.Scale != nil && p.Scale.Surge != nil; wave != tc.wantWave {
				t.Errorf("a wave starts: %t, want %t (scale %+v)", wave, tc.wantWave, p.Scale)
			}
			var got []EventReason
			for _, e := range p.Events {
				got = append(got, e.Reason)
				if e.Reason != ReplicasReverted {
					continue
				}
				if e.Type() != corev1.EventTypeWarning {
					t.Errorf("ReplicasReverted: type %s; want %s", e.Type(), corev1.EventTypeWarning)
				}
				if !containsAll(e.Note(), "something reverts its replicas") {
					t.Errorf("ReplicasReverted: note %q; want it to say something reverts its replicas", e.Note())
				}
			}
			if !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events %v, want %v", got, tc.wantEvents)
			}
			// Carried out, the Deployment says what the plan wrote.
			after := d.DeepCopy()
			p.ApplyScale(after)
			if _, has := after.Annotations[evacuation.SurgeRevertedAnnotation]; has == (tc.wantDropRev || (tc.reverted == "" && tc.wantReverted == 0)) {
				t.Errorf("after the plan, the Deployment's annotations %v", after.Annotations)
			}
		})
	}
}

// legacyBounds writes the autoscaler's record of raised bounds as the previous version did: with
// no UID, of the autoscaler or of the surge's Deployment.
func legacyBounds(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	rec, err := surgepolicy.ParseBounds(h)
	if err != nil || rec == nil {
		panic(err)
	}
	rec.UID = ""
	if rec.Surge != nil {
		s := *rec.Surge
		s.UID = ""
		rec.Surge = &s
	}
	h.Annotations[evacuation.SurgeBoundsAnnotation] = rec.String()
	return h
}

func typesUID(s string) types.UID { return types.UID(s) }

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}
