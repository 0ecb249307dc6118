package decide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzDecide builds a Deployment (surging or not, scaled by someone, eligible or not) and pods
// in every state of the protocol (asked to leave or not, accepted, declined, given up, marked,
// terminating, created by the surge) and checks that the decision's marks are consistent, that a
// wave starts and a surge completes only with enough pods marked to be removed, and that the
// decision is level-based: carried out and taken again at once, it writes no pod again.
//
//	go test ./internal/responder/deployment/decide -run '^$' -fuzz '^FuzzDecide$' -fuzztime 30s
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 1, 0, 0, 0, 0, 1, 2, 1, 0})
	f.Add([]byte{3, 1, 1, 1, 0, 4, 9, 3, 9, 1, 0, 33, 7})
	f.Add([]byte{2, 2, 1, 2, 1, 3, 10, 3, 0, 17, 1, 1, 5, 64})
	f.Add([]byte{4, 3, 2, 1, 2, 4, 0, 3, 9, 9, 9, 9, 9, 9, 16, 48})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(&testutil.FuzzBytes{Data: data})
		p := Decide(in)
		checkMarks(t, in, p)
		after := carryOut(in, p)
		again := Decide(after)
		// Once a rollback has nothing left to remove (no more pods than replicas), its marks go
		// at the next look, as any leftover mark, and the pods still asked to leave are marked
		// again: a step of its own, after the rollback's.
		settled := p.RolledBack && int32(len(livePods(after.Pods))) <= ptr.Deref(after.Deployment.Spec.Replicas, 1)
		again.Unmark = slices.DeleteFunc(again.Unmark, func(pod *corev1.Pod) bool { return settled && rolledBackMark(pod) })
		again.Mark = slices.DeleteFunc(again.Mark, func(pod *corev1.Pod) bool { return settled && evacuation.Requested(pod) })
		if len(again.Answers) > 0 || len(again.Mark) > 0 || len(again.Unmark) > 0 {
			t.Errorf("deciding again after carrying out %s: answers %v, mark %v, unmark %v; want no pod write\nbefore: %s\nafter: %s",
				describe(p), answerNames(again.Answers), podNamesOf(again.Mark), podNamesOf(again.Unmark), describeInput(in), describeInput(after))
		}
	})
}

func fuzzInput(g *testutil.FuzzBytes) Input {
	replicas := int32(1 + g.Byte()%5)
	d := newDeployment(replicas, int32(g.Byte()%4))
	autoscaled := g.Byte()%7 == 0
	var state *surgepolicy.State
	if b := g.Byte(); b%3 != 0 {
		state = &surgepolicy.State{OriginalReplicas: replicas, Surge: int32(1 + b%3), StartTime: metav1.NewMicroTime(now.Add(-time.Duration(g.Byte()) * time.Second))}
		surging(d, state)
		if g.Byte()%5 == 0 {
			d.Spec.Replicas = ptr.To(*d.Spec.Replicas + 1) // scaled by someone
		}
	}
	if g.Byte()%9 == 0 {
		d.Spec.Paused = true
	}
	n := int(g.Byte()%4) + int(replicas)
	if state != nil {
		n += int(state.Surge)
	}
	var pods []*corev1.Pod
	for i := range n {
		b := g.Byte()
		var opts []func(*corev1.Pod)
		if b&1 != 0 {
			opts = append(opts, requested(int(g.Byte()%3)))
		}
		switch (b >> 1) % 4 {
		case 1:
			opts = append(opts, accepted)
		case 2:
			opts = append(opts, declined(surgepolicy.ReasonSurgeTimedOut))
		case 3:
			opts = append(opts, declined(surgepolicy.ReasonPaused))
		}
		if b&8 != 0 {
			opts = append(opts, withMark)
		}
		if b&16 != 0 {
			opts = append(opts, terminating)
		}
		if b&32 != 0 && state != nil {
			opts = append(opts, created(int(g.Byte()%60)))
			if b&128 != 0 {
				opts = append(opts, since(corev1.PodReady, 1)) // a replacement Ready
			}
		}
		if b&64 != 0 {
			opts = append(opts, unschedulable)
		}
		pods = append(pods, pod(fmt.Sprintf("p%d", i), opts...))
	}
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", replicas)}, Pods: pods,
		Autoscaled: autoscaled, Now: now, SurgeTimeout: 2 * time.Minute}
}

// checkMarks asserts the plan's marks: no pod both marked and unmarked, marks only of unmarked
// pods and the reverse; a wave starts with every pod it evacuates marked, and only once the last
// scale-back removed its pods; a surge completes only with at least its size of marked pods
// asked to leave, and with all of its replicas available.
func checkMarks(t *testing.T, in Input, p Plan) {
	t.Helper()
	for _, pod := range p.Mark {
		if IsMarked(pod) || slices.Contains(p.Unmark, pod) {
			t.Errorf("%s: marks %s, which is marked or unmarked too", describe(p), pod.Name)
		}
	}
	for _, pod := range p.Unmark {
		if !IsMarked(pod) {
			t.Errorf("%s: unmarks %s, which is not marked", describe(p), pod.Name)
		}
	}
	markedAfter := func(pod *corev1.Pod) bool {
		return (IsMarked(pod) || slices.Contains(p.Mark, pod)) && !slices.Contains(p.Unmark, pod)
	}
	live := livePods(in.Pods)
	state, _ := surgepolicy.Parse(in.Deployment)
	switch {
	case p.Scale != nil && p.Scale.Surge != nil:
		if state == nil && int32(len(live)) != ptr.Deref(in.Deployment.Spec.Replicas, 1) {
			t.Errorf("%s: a wave starts with %d pods not terminating for %d replicas", describe(p), len(live), ptr.Deref(in.Deployment.Spec.Replicas, 1))
		}
		for _, pod := range live {
			if evacuation.Requested(pod) && !timedOut(pod) && !markedAfter(pod) {
				t.Errorf("%s: a wave starts with %s asked to leave and not marked", describe(p), pod.Name)
			}
		}
	case p.Scale != nil && !p.RolledBack && state != nil:
		n := 0
		for _, pod := range live {
			if evacuation.Requested(pod) && markedAfter(pod) {
				n++
			}
		}
		if int32(n) < state.Surge {
			t.Errorf("%s: a surge of %d completes with %d pods asked to leave marked", describe(p), state.Surge, n)
		}
		if ready, _ := available(live, in.Deployment.Spec.MinReadySeconds, in.Now); !p.DropSurge && ready < ptr.Deref(in.Deployment.Spec.Replicas, 1) {
			t.Errorf("%s: a surge to %d completes with %d pods available", describe(p), ptr.Deref(in.Deployment.Spec.Replicas, 1), ready)
		}
	}
}

// carryOut is what the objects look like once the plan is carried out: the pods' answers and
// marks, the Deployment's replicas and surge record (its status as it was).
func carryOut(in Input, p Plan) Input {
	out := in
	out.Deployment = in.Deployment.DeepCopy()
	copies := map[*corev1.Pod]*corev1.Pod{}
	out.Pods = nil
	for _, pod := range in.Pods {
		copies[pod] = pod.DeepCopy()
		out.Pods = append(out.Pods, copies[pod])
	}
	for _, a := range p.Answers {
		pod := copies[a.Pod]
		if a.Status == "" {
			evacuation.RemoveCondition(pod, evacuation.Initiated)
		} else {
			evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: a.Status, Reason: a.Reason, Message: a.Message()})
		}
	}
	for _, pod := range p.Mark {
		for k, v := range DeletionCost(copies[pod], true) {
			SetAnnotation(copies[pod], k, v)
		}
	}
	for _, pod := range p.Unmark {
		for k, v := range DeletionCost(copies[pod], false) {
			SetAnnotation(copies[pod], k, v)
		}
	}
	p.ApplyScale(out.Deployment)
	return out
}

func describe(p Plan) string {
	return fmt.Sprintf("Plan{answers %v, mark %v, unmark %v, scale %+v, drop %t, rolledBack %t}",
		answerNames(p.Answers), podNamesOf(p.Mark), podNamesOf(p.Unmark), p.Scale, p.DropSurge, p.RolledBack)
}

func answerNames(answers []Answer) []string {
	var out []string
	for _, a := range answers {
		out = append(out, a.Pod.Name+"="+string(a.Status)+"/"+a.Reason)
	}
	return out
}

func describeInput(in Input) string {
	s := fmt.Sprintf("replicas %d surge %q paused %t autoscaled %t;", ptr.Deref(in.Deployment.Spec.Replicas, 1),
		in.Deployment.Annotations[evacuation.SurgeAnnotation], in.Deployment.Spec.Paused, in.Autoscaled)
	for _, pod := range in.Pods {
		s += fmt.Sprintf(" %s(req %t init %v marked %t term %t)", pod.Name, evacuation.Requested(pod),
			evacuation.Condition(pod, evacuation.Initiated) != nil, IsMarked(pod), !pod.DeletionTimestamp.IsZero())
	}
	return s
}
