package deploymentdecide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzDecide builds a Deployment (surging or not, scaled by someone, eligible or not) and pods
// in every state of the protocol (asked to leave or not, accepted, declined, given up, marked,
// terminating, created by the surge), with HorizontalPodAutoscalers (none, one, two, one
// retargeted from it; bounds raised by an earlier decision, changed by someone since, or a
// broken record; the autoscaler scaled the Deployment to its raised minimum before the
// responder's scale; bounds restored, their record kept until the autoscaler settles, with its
// reports of the generation it acted on) and checks that the decision's marks are consistent, that a wave starts and a
// surge completes only with enough pods marked to be removed, that an autoscaler's bounds are
// held at the surged count before the Deployment surges and restored once the surge is over
// (checkBounds), that a surge the autoscaler carried out is adopted (checkAdopted), that a count
// it set from the raised bounds after they were restored is undone until it settles
// (checkUndone), and that the decision is level-based: carried out and taken again at once, it
// writes no pod and no autoscaler again. Over any of those, a record may be forged
// (forgeRecords: what anyone who may patch the Deployment or the autoscaler can write), and no
// scale-down the decision makes goes below what nodemaint itself could have set (checkFloor).
//
//	go test ./internal/controller/deployment/deploymentdecide -run '^$' -fuzz '^FuzzDecide$' -fuzztime 30s
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 1, 0, 0, 0, 0, 1, 2, 1, 0})
	f.Add([]byte{3, 1, 1, 1, 0, 4, 9, 3, 9, 1, 0, 33, 7})
	f.Add([]byte{2, 2, 1, 2, 1, 3, 10, 3, 0, 17, 1, 1, 5, 64})
	f.Add([]byte{4, 3, 2, 1, 2, 4, 0, 3, 9, 9, 9, 9, 9, 9, 16, 48})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &testutil.FuzzBytes{Data: data}
		in := fuzzInput(g)
		forgeRecords(g, in)
		p := Decide(in)
		checkFloor(t, in, p)
		checkMarks(t, in, p)
		checkBounds(t, in, p)
		checkUndone(t, in, p)
		after := carryOut(in, p)
		checkAdopted(t, in, p, after)
		again := Decide(after)
		// A restore that changed no bound leaves the autoscaler's report as it was: it may
		// show the autoscaler settled at once, and the record kept goes.
		again.Restore = slices.DeleteFunc(again.Restore, func(c BoundsChange) bool { return settling(c, p) })
		// The bounds are written once: again only for a new wave or a surge that grows, or to
		// restore them once the surge this decision ended is scaled back (then never again).
		if ended := surgeFound(in) && surgeAfter(in, p) == nil; ended && len(again.Restore) > 0 {
			third := Decide(carryOut(after, again))
			third.Restore = slices.DeleteFunc(third.Restore, func(c BoundsChange) bool { return settling(c, again) })
			if len(third.Restore) > 0 {
				t.Errorf("deciding a third time after %s: restore %v; want the bounds restored once", describe(p), third.Restore)
			}
		} else {
			if len(again.Restore) > 0 {
				t.Errorf("deciding again after carrying out %s: restore %v; want no autoscaler write\nbefore: %s\nafter: %s",
					describe(p), again.Restore, describeInput(in), describeInput(after))
			}
			if wave := again.Scale != nil && again.Scale.Surge != nil; len(again.Raise) > 0 && !wave {
				t.Errorf("deciding again after carrying out %s: raise %v with no new wave or growing surge; want no autoscaler write\nbefore: %s\nafter: %s",
					describe(p), again.Raise, describeInput(in), describeInput(after))
			}
		}
		// Once a rollback has nothing left to remove (no more pods than replicas), its marks go
		// at the next look, as any leftover mark, and the pods still asked to leave are marked
		// again: a step of its own, after the rollback's.
		settled := p.RolledBack && int32(len(livePods(after.Pods))) <= ptr.Deref(after.Deployment.Spec.Replicas, 1)
		again.Unmark = slices.DeleteFunc(again.Unmark, func(pod *corev1.Pod) bool { return settled && rolledBackMark(pod) })
		again.Mark = slices.DeleteFunc(again.Mark, func(pod *corev1.Pod) bool { return settled && evacuation.Requested(pod) })
		if len(again.Answers) > 0 {
			t.Errorf("deciding again after carrying out %s: answers %v; want no pod write\nbefore: %s\nafter: %s",
				describe(p), answerNames(again.Answers), describeInput(in), describeInput(after))
		}
		if len(again.Mark) > 0 {
			t.Errorf("deciding again after carrying out %s: mark %v; want no pod write\nbefore: %s\nafter: %s",
				describe(p), podNamesOf(again.Mark), describeInput(in), describeInput(after))
		}
		if len(again.Unmark) > 0 {
			t.Errorf("deciding again after carrying out %s: unmark %v; want no pod write\nbefore: %s\nafter: %s",
				describe(p), podNamesOf(again.Unmark), describeInput(in), describeInput(after))
		}
	})
}

// settling reports whether the change only removes a record of restored bounds that the plan p
// kept.
func settling(c BoundsChange, p Decision) bool {
	rec, err := surgepolicy.ParseBounds(c.HPA)
	if err != nil || rec == nil || rec.Restored == nil || c.Record != nil {
		return false
	}
	return slices.ContainsFunc(p.Restore, func(r BoundsChange) bool { return r.HPA.Name == c.HPA.Name && r.Record != nil })
}

func fuzzInput(g *testutil.FuzzBytes) Input {
	replicas := int32(1 + g.Byte()%5)
	d := newDeployment(replicas, int32(g.Byte()%4))
	var state *surgepolicy.State
	if b := g.Byte(); b%3 != 0 {
		state = &surgepolicy.State{OriginalReplicas: replicas, Surge: int32(1 + b%3), StartTime: metav1.NewMicroTime(now.Add(-time.Duration(g.Byte()) * time.Second))}
		surging(d, state)
		switch g.Byte() % 5 {
		case 0:
			d.Spec.Replicas = ptr.To(*d.Spec.Replicas + 1) // scaled by someone
		case 1:
			// The autoscaler scaled it to its raised minReplicas before the responder's scale,
			// whose surge record is in the autoscaler's record alone (adoptable).
			delete(d.Annotations, evacuation.SurgeAnnotation)
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
		Autoscalers: fuzzAutoscalers(g, replicas, state), Now: now, SurgeTimeout: 2 * time.Minute}
}

// fuzzAutoscalers are the autoscalers of the Deployment web: none, one, two, or one retargeted
// to another Deployment during web's surge; with bounds, and a record of raised bounds as an
// earlier decision wrote it for the surge in progress (state) or for one that is over, which
// someone may have changed since, or restored and kept until the autoscaler settles, or a broken
// one; the autoscaler reporting no generation, or one it acted on with the count it found there.
func fuzzAutoscalers(g *testutil.FuzzBytes, replicas int32, state *surgepolicy.State) []*autoscalingv2.HorizontalPodAutoscaler {
	mode := g.Byte() % 6
	if mode < 2 {
		return nil
	}
	minReplicas := int32(1 + g.Byte()%4)
	maxReplicas := minReplicas + int32(g.Byte()%4)
	var rec *surgepolicy.Bounds
	switch b := g.Byte(); b % 4 {
	case 1, 2:
		rec = &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To(1 + int32(b>>2)%3), MaxReplicas: 3 + int32(b>>4)%3}
		raised := max(minReplicas, *rec.MinReplicas+1) // a record of a surge that is over
		if state != nil && b%4 == 1 {
			raised = state.OriginalReplicas + state.Surge
			rec.Surge = state
		}
		minReplicas, maxReplicas = raised, max(maxReplicas, raised)
		rec.SetMinReplicas = ptr.To(minReplicas)
		if maxReplicas > rec.MaxReplicas {
			rec.SetMaxReplicas = ptr.To(maxReplicas)
		}
		if b&64 != 0 { // someone changed a bound since
			maxReplicas++
		}
		if b&128 != 0 {
			minReplicas--
		}
		if b&32 != 0 { // restored, the record kept
			rec.Restored = ptr.To(metav1.NewMicroTime(now.Add(-time.Duration(g.Byte()%90) * time.Second)))
			if rec.Surge == nil {
				rec.Surge = &surgepolicy.State{OriginalReplicas: replicas, Surge: 1, StartTime: metav1.NewMicroTime(now.Add(-time.Minute))}
			}
			minReplicas, maxReplicas = ptr.Deref(rec.MinReplicas, 1), rec.MaxReplicas
		}
	case 3:
		rec = &surgepolicy.Bounds{} // broken: written as {"maxReplicas":0}
	}
	h := hpa("h0", "web", max(minReplicas, 1), maxReplicas, rec)
	if b := g.Byte(); b%3 != 0 {
		current := replicas
		if b&4 != 0 && state != nil {
			current = state.OriginalReplicas + state.Surge
		} else if b&4 != 0 {
			current++
		}
		reporting(h, 3, 2+int64(b%3)/2, current) // behind, or at its generation
	}
	switch mode {
	case 4:
		return []*autoscalingv2.HorizontalPodAutoscaler{h, hpa("h1", "web", 1, 5, nil)}
	case 5:
		h.Spec.ScaleTargetRef.Name = "api"
	}
	return []*autoscalingv2.HorizontalPodAutoscaler{h}
}

// checkBounds asserts the autoscalers' bounds the plan writes. While a surge of the Deployment is
// under way as the plan leaves it, the one autoscaler that targets it (holding no other
// Deployment's record) has minReplicas and maxReplicas at least the surged replicas once the
// writes before the Deployment's scale are done (Raise), and no later write lowers them. Once no
// surge is under way, each record naming the Deployment is gone, and each bound the record says
// was set is back to the recorded value where it still held the value set (unless that would put
// minReplicas above maxReplicas), left alone where someone changed it.
func checkBounds(t *testing.T, in Input, p Decision) {
	t.Helper()
	raised, restored := applyBounds(in.Autoscalers, p.Raise), applyBounds(in.Autoscalers, append(slices.Clone(p.Raise), p.Restore...))
	var surged int32
	if surge := surgeAfter(in, p); surge != nil {
		surged = surge.OriginalReplicas + surge.Surge
	}
	for i, h := range in.Autoscalers {
		rec, err := surgepolicy.ParseBounds(h)
		ours := err == nil && (rec == nil || rec.Deployment == "web")
		after := restored[i]
		if surgepolicy.MinReplicas(after) > after.Spec.MaxReplicas {
			t.Errorf("%s: %s ends with minReplicas %d above maxReplicas %d", describe(p), h.Name, surgepolicy.MinReplicas(after), after.Spec.MaxReplicas)
		}
		switch {
		case surged > 0 && targeting(in.Autoscalers, "web") == 1 && surgepolicy.Autoscales(h, "web") && ours:
			for _, got := range []*autoscalingv2.HorizontalPodAutoscaler{raised[i], after} {
				if surgepolicy.MinReplicas(got) < surged {
					t.Errorf("%s: a surge to %d with %s at minReplicas %d; want at least %d", describe(p), surged, h.Name, surgepolicy.MinReplicas(got), surged)
				}
				if got.Spec.MaxReplicas < surged {
					t.Errorf("%s: a surge to %d with %s at maxReplicas %d; want at least %d", describe(p), surged, h.Name, got.Spec.MaxReplicas, surged)
				}
			}
			if _, recorded := after.Annotations[evacuation.SurgeBoundsAnnotation]; !recorded && (surgepolicy.MinReplicas(h) < surged || h.Spec.MaxReplicas < surged) {
				t.Errorf("%s: %s raised with no record", describe(p), h.Name)
			}
		case surged == 0 && surgeFound(in):
			// The surge ends with this decision: the bounds stay until the Deployment is
			// scaled back.
			if len(p.Restore) > 0 {
				t.Errorf("%s: a surge ending restores %s's bounds (%v); want them kept until it is scaled back", describe(p), h.Name, p.Restore)
			}
			if len(p.Raise) > 0 {
				t.Errorf("%s: a surge ending raises %s's bounds (%v); want them kept until it is scaled back", describe(p), h.Name, p.Raise)
			}
		case surged == 0 && rec != nil && rec.Deployment == "web" && rec.Restored != nil:
			checkRestoredKept(t, p, h, rec, after, in.Now)
		case surged == 0 && rec != nil && rec.Deployment == "web":
			checkRestored(t, p, h, rec, after)
		}
	}
}

// checkUndone asserts that a Deployment with no surge record, at the count of the surge a record
// of restored bounds names, is scaled back to the count before that surge while the autoscaler
// has not settled, and is not scaled otherwise (unless a surge is under way).
func checkUndone(t *testing.T, in Input, p Decision) {
	t.Helper()
	if surgeFound(in) {
		return
	}
	replicas := ptr.Deref(in.Deployment.Spec.Replicas, 1)
	undo := int32(0)
	for _, h := range in.Autoscalers {
		rec, err := surgepolicy.ParseBounds(h)
		if err == nil && rec != nil && rec.Restored != nil && rec.Names(h, in.Deployment) && surgeable(in.Deployment, rec.Surge) && surgepolicy.Autoscales(h, "web") &&
			rec.Surged() == replicas && unsettled(h, rec, in.Now) > 0 {
			undo = rec.Surge.OriginalReplicas
		}
	}
	switch {
	case undo > 0 && (p.Scale == nil || p.Scale.Replicas != bounded(p, undo) || p.Scale.Surge != nil):
		t.Errorf("%s: at the count %d of a surge that is over, scaled by the autoscaler before it settled; want it scaled back to %d\n%s", describe(p), replicas, undo, describeInput(in))
	case undo == 0 && p.Scale != nil && p.Scale.Surge == nil:
		t.Errorf("%s: scaled to %d with no surge to end\n%s", describe(p), p.Scale.Replicas, describeInput(in))
	}
}

// surgeFound reports whether the decision found a surge of the Deployment: its record (usable
// or not), or the count of the one its autoscaler's record names.
func surgeFound(in Input) bool {
	return surgeRecorded(in.Deployment) || adoptable(in, ptr.Deref(in.Deployment.Spec.Replicas, 1)) != nil
}

// surgeAfter is the surge in progress once the plan is carried out: the plan's, else the
// Deployment's, or the autoscaler's record's that the Deployment's count shows adopted.
func surgeAfter(in Input, p Decision) *surgepolicy.State {
	state, err := surgepolicy.Parse(in.Deployment)
	if err == nil && state == nil {
		state = adoptable(in, ptr.Deref(in.Deployment.Spec.Replicas, 1))
	}
	return p.surgeAfter(state)
}

// checkAdopted asserts that a surge the autoscaler carried out (the Deployment at the surged
// count its autoscaler's record names, with no surge record of its own) is the responder's
// once the plan is carried out: the Deployment records it (or the surge it grew to), or is back
// at the original count.
func checkAdopted(t *testing.T, in Input, p Decision, after Input) {
	t.Helper()
	replicas := ptr.Deref(in.Deployment.Spec.Replicas, 1)
	rec := adoptable(in, replicas)
	if state, err := surgepolicy.Parse(in.Deployment); err != nil || state != nil || rec == nil {
		return
	}
	got, err := surgepolicy.Parse(after.Deployment)
	afterReplicas := ptr.Deref(after.Deployment.Spec.Replicas, 1)
	switch {
	case err == nil && got != nil && got.OriginalReplicas == rec.OriginalReplicas && got.OriginalReplicas+got.Surge == afterReplicas:
	case got == nil && afterReplicas == bounded(p, rec.OriginalReplicas):
	default:
		t.Errorf("%s: the autoscaler's surge to %d from %d is not adopted: the Deployment ends at %d replicas, surge record %v (%v)",
			describe(p), replicas, rec.OriginalReplicas, afterReplicas, got, err)
	}
}

// checkRestoredKept asserts an autoscaler h with a record rec of restored bounds, after the plan's
// writes: its bounds kept, and the record until it settles.
func checkRestoredKept(t *testing.T, p Decision, h *autoscalingv2.HorizontalPodAutoscaler, rec *surgepolicy.Bounds, after *autoscalingv2.HorizontalPodAutoscaler, now time.Time) {
	t.Helper()
	what := fmt.Sprintf("%s: %s with a record of restored bounds (%s)", describe(p), h.Name, rec)
	if got, want := surgepolicy.MinReplicas(after), surgepolicy.MinReplicas(h); got != want {
		t.Errorf("%s ends at min %d; want its bound kept, %d", what, got, want)
	}
	if after.Spec.MaxReplicas != h.Spec.MaxReplicas {
		t.Errorf("%s ends at max %d; want its bound kept, %d", what, after.Spec.MaxReplicas, h.Spec.MaxReplicas)
	}
	record := after.Annotations[evacuation.SurgeBoundsAnnotation]
	kept := record == h.Annotations[evacuation.SurgeBoundsAnnotation]
	if waiting := unsettled(h, rec, now) > 0; kept != waiting {
		t.Errorf("%s ends with record %q (kept %t); want it kept while unsettled (%t)", what, record, kept, waiting)
	}
	if !kept && record != "" {
		t.Errorf("%s ends with record %q; want it kept or gone", what, record)
	}
}

// checkRestored asserts the restore of an autoscaler from its record rec: after is the autoscaler
// h once the plan's writes are done.
func checkRestored(t *testing.T, p Decision, h *autoscalingv2.HorizontalPodAutoscaler, rec *surgepolicy.Bounds, after *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	// The record stays, restored now, where the autoscaler reports what it acted on.
	kept, err := surgepolicy.ParseBounds(after)
	reports := h.Status.ObservedGeneration != nil
	if has := kept != nil || err != nil; has != reports {
		t.Errorf("%s: the surge is over and %s has the record %q (the autoscaler reports its generation: %t); want a record only where it does",
			describe(p), h.Name, after.Annotations[evacuation.SurgeBoundsAnnotation], reports)
	}
	if kept != nil && (kept.Restored == nil || !kept.Restored.Time.Equal(now)) {
		t.Errorf("%s: the surge is over and %s keeps the record %q; want it restored now", describe(p), h.Name, after.Annotations[evacuation.SurgeBoundsAnnotation])
	}
	if kept != nil && kept.Surged() != rec.Surged() {
		t.Errorf("%s: the surge is over and %s keeps a record of a surge to %d; want %d, the one recorded", describe(p), h.Name, kept.Surged(), rec.Surged())
	}
	// crosses: the recorded value would put minReplicas above maxReplicas as they end.
	for _, b := range []struct {
		name          string
		set           *int32
		was, cur, got int32
		crosses       bool
	}{
		{"minReplicas", rec.SetMinReplicas, ptr.Deref(rec.MinReplicas, 1), surgepolicy.MinReplicas(h), surgepolicy.MinReplicas(after),
			ptr.Deref(rec.MinReplicas, 1) > after.Spec.MaxReplicas},
		{"maxReplicas", rec.SetMaxReplicas, rec.MaxReplicas, h.Spec.MaxReplicas, after.Spec.MaxReplicas,
			rec.MaxReplicas < surgepolicy.MinReplicas(after)},
	} {
		ours := b.set != nil && *b.set == b.cur
		switch {
		case !ours && b.got != b.cur:
			t.Errorf("%s: %s's %s changed by someone to %d, set to %d", describe(p), h.Name, b.name, b.cur, b.got)
		case ours && b.got != b.was && (b.got != b.cur || !b.crosses):
			t.Errorf("%s: %s's %s ends at %d, not restored to %d (was %d)", describe(p), h.Name, b.name, b.got, b.was, b.cur)
		}
	}
}

// applyBounds returns copies of the autoscalers with the changes written.
func applyBounds(hpas []*autoscalingv2.HorizontalPodAutoscaler, changes []BoundsChange) []*autoscalingv2.HorizontalPodAutoscaler {
	out := make([]*autoscalingv2.HorizontalPodAutoscaler, len(hpas))
	for i, h := range hpas {
		out[i] = h.DeepCopy()
		for _, c := range changes {
			if c.HPA == h {
				c.Apply(out[i])
			}
		}
	}
	return out
}

// checkMarks asserts the plan's marks: no pod both marked and unmarked, marks only of unmarked
// pods and the reverse; a wave starts with every pod it evacuates marked, and only once the last
// scale-back removed its pods; a surge completes only with at least its size of marked pods
// asked to leave, and with all of its replicas available.
func checkMarks(t *testing.T, in Input, p Decision) {
	t.Helper()
	for _, pod := range p.Mark {
		if marks.IsMarked(pod) {
			t.Errorf("%s: marks %s, which is marked already", describe(p), pod.Name)
		}
		if slices.Contains(p.Unmark, pod) {
			t.Errorf("%s: marks %s, which it unmarks too", describe(p), pod.Name)
		}
	}
	for _, pod := range p.Unmark {
		if !marks.IsMarked(pod) {
			t.Errorf("%s: unmarks %s, which is not marked", describe(p), pod.Name)
		}
	}
	markedAfter := func(pod *corev1.Pod) bool {
		return (marks.IsMarked(pod) || slices.Contains(p.Mark, pod)) && !slices.Contains(p.Unmark, pod)
	}
	live := livePods(in.Pods)
	state, _ := surgepolicy.Parse(in.Deployment)
	switch {
	case p.Scale != nil && p.Scale.Surge != nil:
		if !surgeFound(in) && int32(len(live)) != ptr.Deref(in.Deployment.Spec.Replicas, 1) {
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
func carryOut(in Input, p Decision) Input {
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
		for k, v := range marks.DeletionCost(copies[pod], true) {
			marks.SetAnnotation(copies[pod], k, v)
		}
	}
	for _, pod := range p.Unmark {
		for k, v := range marks.DeletionCost(copies[pod], false) {
			marks.SetAnnotation(copies[pod], k, v)
		}
	}
	p.ApplyScale(out.Deployment)
	out.Autoscalers = applyBounds(in.Autoscalers, append(slices.Clone(p.Raise), p.Restore...))
	for i, h := range out.Autoscalers {
		if !equality.Semantic.DeepEqual(h.Spec, in.Autoscalers[i].Spec) {
			h.Generation++ // as the API server does on a change of the spec
		}
	}
	return out
}

func describe(p Decision) string {
	return fmt.Sprintf("Decision{answers %v, mark %v, unmark %v, scale %+v, drop %t, rolledBack %t}",
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
	s := fmt.Sprintf("replicas %d surge %q paused %t;", ptr.Deref(in.Deployment.Spec.Replicas, 1),
		in.Deployment.Annotations[evacuation.SurgeAnnotation], in.Deployment.Spec.Paused)
	for _, h := range in.Autoscalers {
		s += fmt.Sprintf(" hpa %s(target %s min %d max %d record %q)", h.Name, h.Spec.ScaleTargetRef.Name,
			surgepolicy.MinReplicas(h), h.Spec.MaxReplicas, h.Annotations[evacuation.SurgeBoundsAnnotation])
	}
	s += ";"
	for _, pod := range in.Pods {
		s += fmt.Sprintf(" %s(req %t init %v marked %t term %t)", pod.Name, evacuation.Requested(pod),
			evacuation.Condition(pod, evacuation.Initiated) != nil, marks.IsMarked(pod), !pod.DeletionTimestamp.IsZero())
	}
	return s
}

// bounded is the count a scale-down to want goes to: want, or what the plan's ScaleBackBounded
// Event says it went to instead.
func bounded(p Decision, want int32) int32 {
	for _, e := range p.Events {
		if e.Reason == ScaleBackBounded && e.Original == want {
			return e.Replicas
		}
	}
	return want
}

// forgeRecords overwrites, at random, one record with what anyone who may patch its object can
// write: the Deployment's surge record, its autoscaler's record of raised or of restored bounds,
// or the Deployment's count of surges set back; naming the object's UID, another's or none, with
// any counts (0 included), at the Deployment's count or not.
func forgeRecords(g *testutil.FuzzBytes, in Input) {
	d := in.Deployment
	uid := func(own types.UID) types.UID {
		switch g.Byte() % 3 {
		case 0:
			return own
		case 1:
			return "someone-else"
		}
		return ""
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	state := func() *surgepolicy.State {
		s := &surgepolicy.State{OriginalReplicas: int32(g.Byte() % 6), StartTime: metav1.NewMicroTime(now.Add(-time.Duration(g.Byte()) * time.Second)), UID: uid(d.UID)}
		if b := g.Byte(); b&1 == 0 {
			s.Surge = replicas - s.OriginalReplicas // at the Deployment's count
		} else {
			s.Surge = int32(b>>1) % 5
		}
		return s
	}
	switch what := g.Byte() % 6; {
	case what == 1:
		withAnnotation(d, evacuation.SurgeAnnotation, state().String())
	case (what == 2 || what == 3) && len(in.Autoscalers) > 0:
		h := in.Autoscalers[0]
		rec := &surgepolicy.Bounds{UID: uid(h.UID), Deployment: "web", MinReplicas: ptr.To(int32(g.Byte() % 4)), MaxReplicas: 1 + int32(g.Byte()%6), Surge: state()}
		if b := g.Byte(); b&1 == 0 {
			rec.SetMinReplicas = ptr.To(surgepolicy.MinReplicas(h)) // claims the bound it holds
		} else {
			rec.SetMinReplicas = ptr.To(int32(b>>1) % 6)
		}
		if what == 3 {
			rec.Restored = ptr.To(metav1.NewMicroTime(now.Add(-time.Duration(g.Byte()%90) * time.Second)))
		}
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[evacuation.SurgeBoundsAnnotation] = rec.String()
	case what == 4:
		withAnnotation(d, evacuation.SurgeRevertedAnnotation, (&surgepolicy.Reverted{UID: uid(d.UID), Count: int32(g.Byte() % 4), Replicas: int32(g.Byte() % 4)}).String())
	}
}

// checkFloor asserts that a scale-down of the Deployment the plan makes, whatever the records
// say, goes to at least 1, to at least the minReplicas of an autoscaler that targets it as its
// owner set it (its minReplicas, or the one its record says it had where the record says
// nodemaint set the one it holds), by at most maxSurge (where that is more than 0), and only for
// a record of nodemaint's: the Deployment's own (its UID, or none: the previous version's), or
// its autoscaler's naming the autoscaler's UID and a surge naming the Deployment's. A record
// naming another object's UID, or an autoscaler's of the previous version, never lowers the
// Deployment below its count.
func checkFloor(t *testing.T, in Input, p Decision) {
	t.Helper()
	d := in.Deployment
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	if p.Scale == nil || p.Scale.Replicas >= replicas {
		return
	}
	to := p.Scale.Replicas
	floor := int32(1)
	ours := false
	for _, h := range in.Autoscalers {
		rec, err := surgepolicy.ParseBounds(h)
		if err == nil && rec != nil && rec.Names(h, d) {
			ours = true
		}
		if !surgepolicy.Autoscales(h, "web") {
			continue
		}
		own := surgepolicy.MinReplicas(h)
		if err == nil && rec != nil && rec.Deployment == "web" && rec.Restored == nil && rec.SetMinReplicas != nil && *rec.SetMinReplicas == own {
			own = ptr.Deref(rec.MinReplicas, 1)
		}
		floor = max(floor, own)
	}
	if state, err := surgepolicy.Parse(d); err == nil && state != nil {
		ours = true
	}
	ms, _ := surgepolicy.MaxSurge(d, to)
	switch {
	case to < floor:
		t.Errorf("%s: scaled from %d to %d, below %d (1, or the autoscaler's own minReplicas)\n%s", describe(p), replicas, to, floor, describeInput(in))
	case ms > 0 && replicas-to > ms:
		t.Errorf("%s: scaled from %d to %d, more than maxSurge %d\n%s", describe(p), replicas, to, ms, describeInput(in))
	case !ours:
		t.Errorf("%s: scaled from %d to %d with no record of nodemaint's\n%s", describe(p), replicas, to, describeInput(in))
	}
}
