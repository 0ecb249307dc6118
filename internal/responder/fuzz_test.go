package responder

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzObserve builds pods, some asked through their conditions, and Evictions of every shape
// (of the pod, of a pod of the same name and another UID, another namespace; the responder in
// any state, with or without its status entry, started, heartbeating, completed; canceled or
// evicted; deleted) and checks that Observe changes none of them, that the decision sees a pod as
// asked exactly when its condition asks or an Eviction makes the responder Active on it and its
// turn is not over (an oracle written apart from evacuation.ForEviction), as accepted only after
// a heartbeat of this turn, that the request kept for it is the Eviction's then, and that the
// heartbeats owed are for accepted Eviction requests only. Run it with e.g.
//
//	go test ./internal/responder -run '^$' -fuzz '^FuzzObserve$' -fuzztime 30s
func FuzzObserve(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x03, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa})
	f.Add([]byte{0xff, 0x01, 0x81, 0x41, 0x21, 0x11, 0x09, 0x05, 0x03, 0x02, 0x01, 0x00, 0x10, 0x20})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &testutil.FuzzBytes{Data: data}
		now := time.Now().Truncate(time.Second)
		at := func() *metav1.Time {
			if g.Byte()%3 == 0 {
				return nil
			}
			return ptr.To(metav1.NewTime(now.Add(-time.Duration(g.Byte()%8) * time.Minute)))
		}
		states := []lifecyclev1alpha1.ResponderStateType{"Inactive", "Active", "Interrupted", "Canceled", "Completed"}
		var pods []*corev1.Pod
		evictions := map[types.UID][]*lifecyclev1alpha1.Eviction{}
		for i := range int(g.Byte()%4) + 1 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p" + string(rune('a'+i)), UID: types.UID("uid-" + string(rune('a'+i)))}}
			if g.Byte()%3 == 0 {
				evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.NewTime(now)})
			}
			if b := g.Byte() % 4; b > 0 {
				// Accepted on the pod: for its first Eviction, its second, or one gone.
				pod.Annotations = map[string]string{evacuation.AcceptedEvictionAnnotation: []string{"", "ev-0", "ev-1", "ev-gone"}[b]}
			}
			for j := range int(g.Byte() % 3) {
				b := g.Byte()
				ev := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e", UID: types.UID(fmt.Sprintf("ev-%d", j))},
					Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}}}
				switch b % 8 {
				case 0:
					ev.Spec.Target.Pod.UID = "other"
				case 1:
					ev.Namespace = "other"
				case 2:
					ev.Spec.Target.Pod = nil
				case 3:
					ev.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				}
				ev.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{
					{Name: me, State: states[int(g.Byte())%len(states)]},
					{Name: "example.com/other", State: states[int(g.Byte())%len(states)]},
				}
				if g.Byte()%2 == 0 {
					ev.Status.Responders = []lifecyclev1alpha1.ResponderStatus{{Name: me, StartTime: at(), HeartbeatTime: at(), CompletionTime: at()}}
				}
				if c := g.Byte() % 4; c > 0 {
					ev.Status.Conditions = []metav1.Condition{{Type: []string{"", "Failed", "TargetEvicted", "Failed"}[c],
						Status: []metav1.ConditionStatus{"", metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse}[c], Reason: "X"}}
				}
				evictions[pod.UID] = append(evictions[pod.UID], ev)
			}
			pods = append(pods, pod)
		}
		snapshot := func() string {
			b, _ := json.Marshal([]any{pods, evictions})
			return string(b)
		}
		before := snapshot()
		v := Observe(pods, evictions, me)
		if snapshot() != before {
			t.Fatal("Observe changed the pods or Evictions it was given")
		}
		if len(v.Pods) != len(pods) {
			t.Fatalf("view of %d pods for %d", len(v.Pods), len(pods))
		}
		for i, pod := range pods {
			seen := v.Pods[i]
			active, accepted := oracle(pod, evictions[pod.UID])
			wantAsked := active || evacuation.Requested(pod)
			if evacuation.Requested(seen) != wantAsked {
				t.Fatalf("%s: asked %t; want %t (by Eviction %t)", pod.Name, evacuation.Requested(seen), wantAsked, active)
			}
			req := v.Request(seen)
			if (req != nil) != wantAsked {
				t.Fatalf("%s: request %v; want one: %t", pod.Name, req, wantAsked)
			}
			if active {
				if req.Protocol() != evacuation.EvictionRequests {
					t.Fatalf("%s: protocol %s; want %s", pod.Name, req.Protocol(), evacuation.EvictionRequests)
				}
				if evacuation.Accepted(seen) != accepted {
					t.Fatalf("%s: accepted %t; want %t", pod.Name, evacuation.Accepted(seen), accepted)
				}
			} else if seen != pod {
				t.Fatalf("%s: a pod not asked through an Eviction was copied", pod.Name)
			}
		}
		beats, next := v.Heartbeats(v.Pods, now)
		for _, b := range beats {
			if b.Request.Protocol() != evacuation.EvictionRequests {
				t.Fatalf("%s: a heartbeat owed to a request by %s; want only to one on an Eviction", b.Request.Pod().Name, b.Request.Protocol())
			}
			if !b.Request.Accepted() {
				t.Fatalf("%s: a heartbeat owed to a request not accepted; want only to accepted ones", b.Request.Pod().Name)
			}
			if b.Request.HeartbeatDue().After(now) {
				t.Fatalf("%s: a heartbeat before it is due (%v)", b.Request.Pod().Name, b.Request.HeartbeatDue())
			}
		}
		if !next.IsZero() && !next.After(now) {
			t.Fatalf("next heartbeat %v, not after now %v", next, now)
		}
	})
}

// oracle says whether an Eviction makes the responder Active on the pod with its turn not over,
// and whether it accepted in this turn.
func oracle(pod *corev1.Pod, evictions []*lifecyclev1alpha1.Eviction) (active, accepted bool) {
	for _, ev := range evictions {
		t := ev.Spec.Target.Pod
		if t == nil || t.UID != pod.UID || t.Name != pod.Name || ev.Namespace != pod.Namespace || ev.DeletionTimestamp != nil {
			continue
		}
		over := false
		for _, c := range ev.Status.Conditions {
			over = over || (c.Status == metav1.ConditionTrue && (c.Type == "Failed" || c.Type == "TargetEvicted"))
		}
		if over || ev.Status.TargetResponders[0].State != "Active" {
			continue
		}
		var s lifecyclev1alpha1.ResponderStatus
		if len(ev.Status.Responders) > 0 {
			s = ev.Status.Responders[0]
		}
		afterStart := func(x *metav1.Time) bool { return x != nil && (s.StartTime == nil || !x.Before(s.StartTime)) }
		if afterStart(s.CompletionTime) {
			continue
		}
		return true, afterStart(s.HeartbeatTime) || (ev.UID != "" && pod.Annotations[evacuation.AcceptedEvictionAnnotation] == string(ev.UID))
	}
	return false, false
}
