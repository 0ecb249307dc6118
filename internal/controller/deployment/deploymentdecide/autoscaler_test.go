package deploymentdecide

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestAutoscalerBounds: the bounds of a Deployment's HorizontalPodAutoscaler are raised to the
// surged count before the Deployment surges, their record naming the surge, kept while it
// surges, and restored (where nobody changed them since) once a decision finds the Deployment
// scaled back after the surge completed or rolled back, or never surged; a surge the
// autoscaler carried out first is adopted.
func TestAutoscalerBounds(t *testing.T) {
	state := func(original, surge int32) *surgepolicy.State {
		return &surgepolicy.State{OriginalReplicas: original, Surge: surge, StartTime: metav1.NewMicroTime(now.Add(-10 * time.Second)), UID: "d"}
	}
	wave := func(original, surge int32) *surgepolicy.State {
		return &surgepolicy.State{OriginalReplicas: original, Surge: surge, StartTime: metav1.NewMicroTime(now), UID: "d"}
	}
	// raised is the record of bounds raised from 3, 3 to 4, 4 for the surge in progress.
	raised := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), SetMaxReplicas: ptr.To[int32](4),
		Surge: state(3, 1)}
	// restored is the record kept once the bounds are restored, 5s ago, until the autoscaler
	// settles.
	restored := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), SetMaxReplicas: ptr.To[int32](4),
		Surge: state(3, 1), Restored: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))}
	asked := func() []*corev1.Pod {
		return []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}
	}
	// The surge's replacement s is Ready: the surge completes.
	replaced := func() []*corev1.Pod { return append(asked(), pod("s", created(5), since(corev1.PodReady, 1))) }
	// Scaled back, the surge's replacement s stays; then scaled up again (t) by the autoscaler.
	rescaled := func() []*corev1.Pod {
		return []*corev1.Pod{pod("b"), pod("c"), pod("s", created(5), since(corev1.PodReady, 1)), pod("t", created(1))}
	}
	type bounds struct {
		min, max int32
		record   bool
	}
	for name, tc := range map[string]struct {
		d           *appsv1.Deployment
		hpas        []*autoscalingv2.HorizontalPodAutoscaler
		pods        []*corev1.Pod
		wantScale   *ScaleChange
		wantRaise   map[string]bounds // by autoscaler
		wantRestore map[string]bounds
		wantEvents  []EventReason
	}{
		"a wave starts: min and max raised to the surged count first, the originals recorded": {
			d:         newDeployment(3, 1),
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, nil)},
			pods:      asked(),
			wantScale: &ScaleChange{Replicas: 4, Surge: wave(3, 1)},
			wantRaise: map[string]bounds{"web": {4, 4, true}},
		},
		"a wave starts, maxReplicas above the surged count: only min raised": {
			d:         newDeployment(3, 1),
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 2, 10, nil)},
			pods:      asked(),
			wantScale: &ScaleChange{Replicas: 4, Surge: wave(3, 1)},
			wantRaise: map[string]bounds{"web": {4, 10, true}},
		},
		"surging, the bounds held: nothing to write": {
			d:    surging(newDeployment(3, 1), state(3, 1)),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods: append(asked(), pod("s", created(5))),
		},
		"surging, the bounds not held (an autoscaler created during the surge): raised": {
			d:         surging(newDeployment(3, 1), state(3, 1)),
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, nil)},
			pods:      append(asked(), pod("s", created(5))),
			wantRaise: map[string]bounds{"web": {4, 4, true}},
		},
		"the surge completes: scaled back, the bounds kept until a decision finds it scaled back": {
			d:          surging(newDeployment(3, 1), state(3, 1)),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:       replaced(),
			wantScale:  &ScaleChange{Replicas: 3},
			wantEvents: []EventReason{SurgeCompleted},
		},
		"scaled back: the bounds restored": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:        []*corev1.Pod{pod("b"), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantRestore: map[string]bounds{"web": {3, 3, false}},
			wantEvents:  []EventReason{AutoscalerRestored},
		},
		"scaled back, the autoscaler reports the generation it acted on: restored, the record kept until it settles": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 4, 4, raised), 2, 2, 4)},
			pods:        []*corev1.Pod{pod("b"), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantRestore: map[string]bounds{"web": {3, 3, true}},
			wantEvents:  []EventReason{AutoscalerRestored},
		},
		"restored, the autoscaler not yet acting on it: nothing, and no wave": {
			d:    newDeployment(3, 1),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, restored), 3, 2, 4)},
			pods: asked(),
		},
		"restored, then scaled to the surge's count by the autoscaler from the raised minimum it acted on before: scaled back": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, restored), 3, 2, 3)},
			pods:       rescaled(),
			wantScale:  &ScaleChange{Replicas: 3},
			wantEvents: []EventReason{AutoscaledSurgeUndone},
		},
		"restored, the autoscaler acted on it and found the surge's count (scaled before): scaled back, the record kept": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, restored), 3, 3, 4)},
			pods:       rescaled(),
			wantScale:  &ScaleChange{Replicas: 3},
			wantEvents: []EventReason{AutoscaledSurgeUndone},
		},
		"restored, the autoscaler acted on it and found the count before the surge: settled, the record goes": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, restored), 3, 3, 3)},
			pods:        asked(),
			wantRestore: map[string]bounds{"web": {3, 3, false}},
		},
		"settled, then scaled to the surge's count by the autoscaler from the restored bounds: its own, the record goes": {
			d:           newDeployment(4, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 5, restored), 3, 3, 3)},
			pods:        rescaled(),
			wantRestore: map[string]bounds{"web": {3, 5, false}},
		},
		"restored, the autoscaler silent for the settle timeout: the record goes, the count stays": {
			d: newDeployment(4, 1),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3),
				MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: state(3, 1), Restored: ptr.To(metav1.NewMicroTime(now.Add(-SettleTimeout)))}), 3, 2, 3)},
			pods:        rescaled(),
			wantRestore: map[string]bounds{"web": {3, 3, false}},
		},
		"restored, a record that names no surge (written before records named it), scaled to 0: nothing to undo": {
			d: newDeployment(0, 1),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 3, 3, &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3),
				MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Restored: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))}), 3, 2, 3)},
		},
		"restored, a surge recorded since: raised again with a record of the bounds as they are": {
			d:         surging(newDeployment(3, 1), state(3, 1)),
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 2, 3, restored), 3, 2, 3)},
			pods:      append(asked(), pod("s", created(5))),
			wantRaise: map[string]bounds{"web": {4, 4, true}},
		},
		"scaled back, maxReplicas changed by someone since: theirs stays": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 6, raised)},
			pods:        []*corev1.Pod{pod("b"), pod("c"), pod("s", created(5), since(corev1.PodReady, 1))},
			wantRestore: map[string]bounds{"web": {3, 6, false}},
		},
		"rolled back (the request withdrawn): scaled back, the bounds kept for the next look": {
			d:         surging(newDeployment(3, 1), state(3, 1)),
			hpas:      []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:      []*corev1.Pod{pod("a", accepted, withMark), pod("b"), pod("c"), pod("s", created(5))},
			wantScale: &ScaleChange{Replicas: 3},
		},
		"raised, then stopped before the Deployment surged: the wave starts again, the bounds already held, the record names it": {
			d:          newDeployment(3, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:       asked(),
			wantScale:  &ScaleChange{Replicas: 4, Surge: wave(3, 1)},
			wantRaise:  map[string]bounds{"web": {4, 4, true}},
			wantEvents: []EventReason{SurgeStarted},
		},
		"the autoscaler scaled the Deployment to its raised minimum before the responder: the surge adopted": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:       append(asked(), pod("s", created(5))),
			wantScale:  &ScaleChange{Replicas: 4, Surge: state(3, 1)},
			wantEvents: []EventReason{SurgeAdopted},
		},
		"the autoscaler's surge adopted as its replacement is Ready: it completes, scaled back": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:       replaced(),
			wantScale:  &ScaleChange{Replicas: 3},
			wantEvents: []EventReason{SurgeCompleted},
		},
		// Nobody asked to leave: the record alone would have the Deployment scaled down, and it
		// is only the autoscaler's word (its writer's, who may not write the Deployment).
		"scaled back, then scaled up again by the autoscaler before the bounds were restored, nobody asked to leave: not adopted, the bounds restored (the autoscaler scales back itself)": {
			d:           newDeployment(4, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:        rescaled(),
			wantRestore: map[string]bounds{"web": {3, 3, false}},
			wantEvents:  []EventReason{AutoscalerRestored},
		},
		"scaled up by the autoscaler to a record's surge, the pods still asked to leave: adopted": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:       append(asked(), pod("s", created(5))),
			wantScale:  &ScaleChange{Replicas: 4, Surge: state(3, 1)},
			wantEvents: []EventReason{SurgeAdopted},
		},
		"at the count of a record's surge, the autoscaler's bounds changed by someone since: still adopted, raised again": {
			d:          newDeployment(4, 1),
			hpas:       []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 4, raised)},
			pods:       append(asked(), pod("s", created(5))),
			wantScale:  &ScaleChange{Replicas: 4, Surge: state(3, 1)},
			wantRaise:  map[string]bounds{"web": {4, 4, true}},
			wantEvents: []EventReason{SurgeAdopted, AutoscalerRaised},
		},
		"raised, no surge and nothing asked any more: restored": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4, raised)},
			pods:        []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			wantRestore: map[string]bounds{"web": {3, 3, false}},
		},
		"retargeted to another Deployment during the surge: restored from the record": {
			d:           surging(newDeployment(3, 1), state(3, 1)),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "api", 4, 4, raised)},
			pods:        append(asked(), pod("s", created(5))),
			wantRestore: map[string]bounds{"web": {3, 3, false}},
		},
		"the autoscaler holds another Deployment's bounds: no wave until restored": {
			d: newDeployment(3, 1),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 4, 4,
				&surgepolicy.Bounds{Deployment: "api", MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4)})},
			pods: asked(),
		},
		"two autoscalers: declined, neither touched": {
			d:    newDeployment(3, 1),
			hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, nil), hpa("web2", "web", 3, 3, nil)},
			pods: []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")},
		},
		"a broken record, no surge: removed, the bounds left": {
			d:           newDeployment(3, 1),
			hpas:        []*autoscalingv2.HorizontalPodAutoscaler{withBounds(hpa("web", "web", 3, 3, nil), "{")},
			pods:        []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			wantRestore: map[string]bounds{"web": {3, 3, false}},
			wantEvents:  []EventReason{InvalidBoundsRecord},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := Input{Deployment: tc.d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)}, Pods: tc.pods,
				Autoscalers: tc.hpas, Now: now, SurgeTimeout: 2 * time.Minute}
			p := Decide(in)
			switch {
			case (p.Scale == nil) != (tc.wantScale == nil):
				t.Errorf("scale = %+v, want %+v", p.Scale, tc.wantScale)
			case p.Scale != nil && (p.Scale.Replicas != tc.wantScale.Replicas || p.Scale.Surge.String() != tc.wantScale.Surge.String()):
				t.Errorf("scale = %d %s, want %d %s", p.Scale.Replicas, p.Scale.Surge, tc.wantScale.Replicas, tc.wantScale.Surge)
			}
			for what, c := range map[string]struct {
				got  []BoundsChange
				want map[string]bounds
			}{"raise": {p.Raise, tc.wantRaise}, "restore": {p.Restore, tc.wantRestore}} {
				got := map[string]bounds{}
				for _, ch := range c.got {
					got[ch.HPA.Name] = bounds{ptr.Deref(ch.MinReplicas, 1), ch.MaxReplicas, ch.Record != nil}
				}
				if len(got) != len(c.want) {
					t.Errorf("%s = %v, want %v", what, got, c.want)
				}
				for k, v := range c.want {
					if got[k] != v {
						t.Errorf("%s %s = %+v, want %+v", what, k, got[k], v)
					}
				}
			}
			for _, ch := range p.Raise {
				if ch.Record.Deployment != "web" {
					t.Errorf("raise of %s records Deployment %q; want web", ch.HPA.Name, ch.Record.Deployment)
				}
				if got, want := ptr.Deref(ch.Record.SetMinReplicas, 0), ptr.Deref(ch.MinReplicas, 0); got != want {
					t.Errorf("raise of %s records minReplicas set to %d; want %d, the one it sets", ch.HPA.Name, got, want)
				}
				if want := surgeAfter(in, p); !ch.Record.Surge.Equal(want) {
					t.Errorf("raise of %s records the surge %v; want %v", ch.HPA.Name, ch.Record.Surge, want)
				}
				// A raise from bounds not raised before records the bounds before.
				if was, _ := surgepolicy.ParseBounds(ch.HPA); was != nil && was.Restored == nil {
					continue
				}
				if got, want := ptr.Deref(ch.Record.MinReplicas, 1), surgepolicy.MinReplicas(ch.HPA); got != want {
					t.Errorf("raise of %s records minReplicas %d; want its bounds before, %d", ch.HPA.Name, got, want)
				}
				if ch.Record.MaxReplicas != ch.HPA.Spec.MaxReplicas {
					t.Errorf("raise of %s records maxReplicas %d; want its bounds before, %d", ch.HPA.Name, ch.Record.MaxReplicas, ch.HPA.Spec.MaxReplicas)
				}
				if ch.Record.Restored != nil {
					t.Errorf("raise of %s records restored %v; want none", ch.HPA.Name, ch.Record.Restored)
				}
			}
			for _, ch := range p.Restore {
				if ch.Record == nil {
					continue
				}
				if ch.Record.Restored == nil || !ch.Record.Restored.Equal(&metav1.MicroTime{Time: now}) {
					t.Errorf("restore of %s keeps the record %s; want it restored now", ch.HPA.Name, ch.Record)
				}
				if p.RequeueAfter != SettleTimeout {
					t.Errorf("restore of %s keeping its record: requeue after %v; want %v", ch.HPA.Name, p.RequeueAfter, SettleTimeout)
				}
			}
			var reasons []EventReason
			for _, e := range p.Events {
				reasons = append(reasons, e.Reason)
			}
			for _, r := range tc.wantEvents {
				if !slices.Contains(reasons, r) {
					t.Errorf("events %v, want %s among them", reasons, r)
				}
			}
		})
	}
}

func withBounds(h *autoscalingv2.HorizontalPodAutoscaler, v string) *autoscalingv2.HorizontalPodAutoscaler {
	h.Annotations = map[string]string{evacuation.SurgeBoundsAnnotation: v}
	return h
}
