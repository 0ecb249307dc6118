package protocol

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzWrites builds a node's pods, each with or without a responder of its own, nodemaint's pod
// condition, a request of nodemaint's left (asking or withdrawn) and an Eviction under way, and a
// decision asking (some of them signal only: nothing would evict them), withdrawing and evicting
// some of them, and checks that under EvictionRequests each pod is written in exactly one
// protocol: a pod that names a responder and that a maintenance would evict is asked only through
// an EvictionRequest, and every other only through nodemaint's pod condition; no EvictionRequest
// of nodemaint's asks for a signal-only pod's eviction after the writes (one left is withdrawn or
// deleted), nor for a pod without a responder; and nothing is asked and withdrawn in one
// reconcile. Under pod conditions every pod is written as the decision says. Run it with e.g.
//
//	go test ./internal/controller/protocol -run '^$' -fuzz '^FuzzWrites$' -fuzztime 30s
func FuzzWrites(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x04, 0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88})
	f.Add([]byte{0xff, 0xff, 0x00, 0x81, 0x42, 0x24, 0x18, 0x99, 0x66, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &testutil.FuzzBytes{Data: data}
		now := time.Now().Truncate(time.Second)
		seen := &requester.Observed{Node: "n", Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{}}
		var pods []*corev1.Pod
		var d nodedecide.Decision
		d.RequestReason = "r"
		for i := range int(g.Byte()%6) + 1 {
			pod := fuzzPod(g, i, now, seen)
			pods = append(pods, pod)
			switch b := g.Byte(); {
			case b%5 == 0:
				d.Request = append(d.Request, pod)
				d.Asked = append(d.Asked, pod)
			case b%5 == 1 && evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance):
				d.Withdraw = append(d.Withdraw, pod)
			case b%5 == 2:
				d.Evict = append(d.Evict, drain.Classified{Pod: pod})
				d.Asked = append(d.Asked, pod)
			case b%5 == 3:
				d.Asked = append(d.Asked, pod) // asked before, still asked
			}
		}
		for _, pod := range d.Asked {
			if g.Byte()%3 == 0 {
				if d.SignalOnly == nil {
					d.SignalOnly = map[types.UID]bool{}
				}
				d.SignalOnly[pod.UID] = true
			}
		}
		// The pods as the drain saw them: answered by nodemaint's requests.
		seen.PodConditions = requester.WithPodCondition(pods)
		pods = requester.Answer(pods, *seen)
		for _, list := range [][]*corev1.Pod{d.Request, d.Asked, d.Withdraw} {
			for i, pod := range list {
				list[i] = answered(pods, pod.UID)
			}
		}
		for i := range d.Evict {
			d.Evict[i].Pod = answered(pods, d.Evict[i].Pod.UID)
		}

		w := Protocol{EvictionRequests: &EvictionRequests{}}.Writes(seen, pods, d, now)
		checkOneProtocol(t, seen, pods, d, w)
		pc := Protocol{}.Writes(nil, pods, d, now)
		if len(pc.Request) != len(d.Request) || len(pc.Withdraw) != len(d.Withdraw) ||
			len(pc.RequestRequests.Create)+len(pc.WithdrawRequests.Delete) != 0 {
			t.Fatalf("pod conditions: %+v for a decision of %d requests, %d withdrawals, %d evictions", pc, len(d.Request), len(d.Withdraw), len(d.Evict))
		}
	})
}

// fuzzPod is the i-th pod: with or without a responder of its own and nodemaint's pod condition,
// and a request of nodemaint's (asking or withdrawn, with its Eviction under way or not) in seen.
func fuzzPod(g *testutil.FuzzBytes, i int, now time.Time, seen *requester.Observed) *corev1.Pod {
	b := g.Byte()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p" + string(rune('a'+i)), UID: types.UID("uid-" + string(rune('a'+i)))}}
	if b&1 != 0 {
		pod.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "owner.example.com/r", Priority: ptr.To[int32](10000)}}
	}
	if b&2 != 0 {
		evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: evacuation.ReasonNodeMaintenance, LastTransitionTime: metav1.NewTime(now)})
	}
	if b&4 != 0 {
		plan := requester.WritesOf(requester.Observed{Node: "n"}, []*corev1.Pod{registered(pod)}, []*corev1.Pod{registered(pod)}, nil, "r", now)
		r := *plan.Create[0]
		if b&8 != 0 {
			r.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		}
		seen.Requests = append(seen.Requests, r)
	}
	if b&16 != 0 {
		seen.Evictions[pod.UID] = &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-1-" + pod.Name}}
	}
	return pod
}

// answered is the pod of uid among pods.
func answered(pods []*corev1.Pod, uid types.UID) *corev1.Pod {
	for _, p := range pods {
		if p.UID == uid {
			return p
		}
	}
	return nil
}

// registered is a copy of the pod that names a responder.
func registered(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "owner.example.com/r"}}
	return p
}

func checkOneProtocol(t *testing.T, seen *requester.Observed, pods []*corev1.Pod, d nodedecide.Decision, w Writes) {
	t.Helper()
	left := map[types.UID]bool{}
	for _, r := range seen.Requests {
		left[r.Spec.Target.Pod.UID] = r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	}
	conditioned := uids(seen.PodConditions)
	byCondition := uids(w.Request)
	withdrawnByCondition := uids(w.Withdraw)
	asking, withdrawnRequests, deleted := map[types.UID]bool{}, map[types.UID]bool{}, map[types.UID]bool{}
	for _, r := range append(w.RequestRequests.Create, w.RequestRequests.Update...) {
		asking[r.Spec.Target.Pod.UID] = true
	}
	for _, r := range w.WithdrawRequests.Update {
		withdrawnRequests[r.Spec.Target.Pod.UID] = true
	}
	for _, r := range w.WithdrawRequests.Delete {
		deleted[r.Spec.Target.Pod.UID] = true
	}
	for _, pod := range d.Request {
		if viaRequest := ChannelOf(pod, d) == EvictionRequest; viaRequest == byCondition[pod.UID] {
			t.Fatalf("pod %s (responders %v, signal only %v) asked through its condition: %v", pod.Name, pod.Spec.EvictionResponders, d.SignalOnly[pod.UID], byCondition[pod.UID])
		}
	}
	asked := uids(d.Asked)
	for _, pod := range pods {
		reg, uid := requester.Registered(pod), pod.UID
		viaRequest := asked[uid] && ChannelOf(pod, d) == EvictionRequest
		switch {
		case !reg && asking[uid]:
			t.Fatalf("pod %s names no responder and is asked through an EvictionRequest", pod.Name)
		case d.SignalOnly[uid] && asking[uid]:
			t.Fatalf("pod %s is signal only and is asked through an EvictionRequest", pod.Name)
		case viaRequest && byCondition[uid]:
			t.Fatalf("pod %s names a responder, may be evicted, and is asked through its condition", pod.Name)
		case byCondition[uid] && withdrawnByCondition[uid], asking[uid] && (withdrawnRequests[uid] || deleted[uid]):
			t.Fatalf("pod %s asked and withdrawn at once", pod.Name)
		case !viaRequest && left[uid] && !withdrawnRequests[uid] && !deleted[uid] && (!reg || asked[uid]):
			t.Fatalf("pod %s is asked through its condition (responder %v, signal only %v) and nodemaint's EvictionRequest for it stays", pod.Name, reg, d.SignalOnly[uid])
		case viaRequest && !left[uid] && !asking[uid]:
			t.Fatalf("pod %s names a responder, may be evicted, is asked, and has no EvictionRequest", pod.Name)
		case viaRequest && conditioned[uid] && !withdrawnByCondition[uid]:
			t.Fatalf("pod %s is asked through an EvictionRequest and keeps nodemaint's pod condition", pod.Name)
		case asked[uid] && !viaRequest && reg && !conditioned[uid] && !byCondition[uid]:
			t.Fatalf("pod %s names a responder, is signal only, and is not asked through its condition", pod.Name)
		}
	}
}

func uids(pods []*corev1.Pod) map[types.UID]bool {
	out := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}
