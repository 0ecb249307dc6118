package deploymentdecide

// The HorizontalPodAutoscaler of a surging Deployment: its bounds held at the surged count while
// the surge is in progress, restored from the record on the autoscaler once it is over. An
// autoscaler undoes a raised spec.replicas (above maxReplicas it scales down at once; with
// metrics it recomputes the count), and a scale-down during a surge would remove the pods asked
// to leave (marked to go first) before their replacements are available. Restored, the record
// stays until the autoscaler settled (unsettled): until then, a count it set from the raised
// bounds after the scale-back is the responder's to undo.

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// BoundsChange is a write of a HorizontalPodAutoscaler's minReplicas, maxReplicas and record of
// raised bounds (evacuation.SurgeBoundsAnnotation), in one patch that applies only to the
// autoscaler as read (its resourceVersion).
type BoundsChange struct {
	HPA         *autoscalingv2.HorizontalPodAutoscaler
	MinReplicas *int32
	MaxReplicas int32
	// Record is the new record; nil removes it.
	Record *surgepolicy.Bounds
}

// Apply sets the change on the autoscaler (in memory; a copy of HPA).
func (c BoundsChange) Apply(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	hpa.Spec.MinReplicas = c.MinReplicas
	hpa.Spec.MaxReplicas = c.MaxReplicas
	var rec *string
	if c.Record != nil {
		rec = ptr.To(c.Record.String())
	}
	marks.SetAnnotation(hpa, evacuation.SurgeBoundsAnnotation, rec)
}

// targeting counts the autoscalers that target the Deployment.
func targeting(hpas []*autoscalingv2.HorizontalPodAutoscaler, deployment string) int {
	n := 0
	for _, hpa := range hpas {
		if surgepolicy.Autoscales(hpa, deployment) {
			n++
		}
	}
	return n
}

// boundsTaken reports whether an autoscaler of the Deployment holds bounds raised for another
// Deployment (it was retargeted during that one's surge): a wave waits until that Deployment's
// decision restores them, since one record per autoscaler says what to restore. It waits as well
// while the record of the Deployment's last surge is kept after the restore (unsettled).
func boundsTaken(hpas []*autoscalingv2.HorizontalPodAutoscaler, deployment string) bool {
	for _, hpa := range hpas {
		rec, err := surgepolicy.ParseBounds(hpa)
		if surgepolicy.Autoscales(hpa, deployment) && (err != nil || (rec != nil && (rec.Deployment != deployment || rec.Restored != nil))) {
			return true
		}
	}
	return false
}

// SettleTimeout bounds the wait for an autoscaler to settle after its bounds are restored: one
// that fails before it reports (its target's scale unreadable), or a controller manager that
// does not run it, would keep the record for good.
const SettleTimeout = time.Minute

// unsettled is how long the record of restored bounds rec stays on the autoscaler, 0 once it
// goes: once the autoscaler acted on the restored bounds (its status.observedGeneration reached
// its generation) and found the Deployment not at the surged count, no decision it took from the
// raised bounds is still to come; or SettleTimeout after the restore.
func unsettled(hpa *autoscalingv2.HorizontalPodAutoscaler, rec *surgepolicy.Bounds, now time.Time) time.Duration {
	if seen := hpa.Status.ObservedGeneration; seen != nil && *seen >= hpa.Generation && hpa.Status.CurrentReplicas != rec.Surged() {
		return 0
	}
	return max(0, rec.Restored.Add(SettleTimeout).Sub(now))
}

// undoAutoscaled decides the Deployment's count while the record of its last surge's restored
// bounds is unsettled: at that surge's count, with no surge of its own, it was scaled by a
// decision its autoscaler took from the raised minReplicas before it saw them restored, and goes
// back to the count before the surge. Once the autoscaler settled, a count it sets is its own.
func (p *Decision) undoAutoscaled(in Input, replicas int32) {
	for _, hpa := range in.Autoscalers {
		rec, err := surgepolicy.ParseBounds(hpa)
		if err != nil || rec == nil || rec.Restored == nil || !rec.Names(hpa, in.Deployment) || !surgeable(in.Deployment, rec.Surge) ||
			!surgepolicy.Autoscales(hpa, rec.Deployment) || rec.Surged() != replicas || unsettled(hpa, rec, in.Now) == 0 {
			continue
		}
		p.Scale = &ScaleChange{Replicas: rec.Surge.OriginalReplicas}
		p.Events = append(p.Events, Event{Reason: AutoscaledSurgeUndone, Autoscaler: hpa.Name, Original: rec.Surge.OriginalReplicas, Surge: rec.Surge.Surge})
		return
	}
}

// Autoscalers decides the bounds of the autoscalers of the Deployment named deployment, those
// that target it or whose record names it, for surge: the surge in progress as the plan leaves
// it, nil when none is. During a surge, the one autoscaler that targets the Deployment keeps
// minReplicas, and maxReplicas, at least the surged count, and its record names the surge
// (Raise: written before the Deployment's scale); otherwise each record naming the Deployment
// is undone (Restore; Decide asks for it once the Deployment is scaled back): a bound that still
// holds the value set returns to the recorded one, a bound someone changed since stays, and the
// record goes. An unusable record is removed, the bounds left as they are. It replaces
// the plan's earlier bounds decision, and adds its Events. It is for a Deployment whose count
// nobody guards any more (gone, or released): Decide keeps a restored record until the
// autoscaler settled.
func (p *Decision) Autoscalers(hpas []*autoscalingv2.HorizontalPodAutoscaler, deployment string, surge *surgepolicy.State) {
	p.autoscalers(hpas, deployment, surge, time.Time{}, false)
}

// autoscalers is Autoscalers; with settle, the record of a restore stays, restored at now, on an
// autoscaler that reports the generation it acted on (a controller manager before Kubernetes
// 1.37, or with the HPAGeneration feature gate off, does not: it could not be seen to settle), and
// goes once the autoscaler settled.
func (p *Decision) autoscalers(hpas []*autoscalingv2.HorizontalPodAutoscaler, deployment string, surge *surgepolicy.State, now time.Time, settle bool) {
	p.Raise, p.Restore = nil, nil
	hold := surge != nil && targeting(hpas, deployment) == 1
	for _, hpa := range hpas {
		rec, err := surgepolicy.ParseBounds(hpa)
		switch {
		case err != nil && surgepolicy.Autoscales(hpa, deployment):
			p.Events = append(p.Events, Event{Reason: InvalidBoundsRecord, Autoscaler: hpa.Name, Problem: err.Error()})
			if !hold || !p.raise(hpa, nil, deployment, surge) {
				// The record alone goes (a raise writes a new one over it).
				p.Restore = append(p.Restore, BoundsChange{HPA: hpa, MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: hpa.Spec.MaxReplicas})
			}
		case err != nil || (rec != nil && rec.Deployment != deployment):
			// Another Deployment's record: its decision restores it.
		case hold && surgepolicy.Autoscales(hpa, deployment):
			p.raise(hpa, rec, deployment, surge)
		case rec != nil && rec.Restored != nil:
			if wait := unsettled(hpa, rec, now); settle && wait > 0 {
				p.RequeueAfter = recheck.Soonest(p.RequeueAfter, wait)
			} else {
				p.Restore = append(p.Restore, BoundsChange{HPA: hpa, MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: hpa.Spec.MaxReplicas})
			}
		case rec != nil:
			p.restore(hpa, rec, now, settle)
		}
	}
}

// raise decides the bounds of the autoscaler during the surge: minReplicas and maxReplicas at
// least its surged count, the bounds before the surge kept in the record (from the record when
// there is one: a surge that grows raises them again), and the surge named in the record. It
// reports whether the autoscaler changes.
func (p *Decision) raise(hpa *autoscalingv2.HorizontalPodAutoscaler, rec *surgepolicy.Bounds, deployment string, surge *surgepolicy.State) bool {
	surged := surge.OriginalReplicas + surge.Surge
	curMin, curMax := surgepolicy.MinReplicas(hpa), hpa.Spec.MaxReplicas
	if rec != nil && rec.Restored != nil {
		rec = nil // the bounds are the autoscaler's again
	}
	raised := curMin < surged || curMax < surged
	if !raised && (rec == nil || rec.Surge.Equal(surge)) {
		return false
	}
	next := surgepolicy.Bounds{Deployment: deployment, MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: curMax}
	if rec != nil {
		next = *rec
	}
	next.UID, next.Surge = hpa.UID, surge
	c := BoundsChange{HPA: hpa, MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: curMax, Record: &next}
	e := Event{Reason: AutoscalerRaised, Autoscaler: hpa.Name, Replicas: surged, MinWas: curMin, MaxWas: curMax, Min: curMin, Max: curMax}
	if curMin < surged {
		c.MinReplicas, next.SetMinReplicas, e.Min = ptr.To(surged), ptr.To(surged), surged
	}
	if curMax < surged {
		c.MaxReplicas, next.SetMaxReplicas, e.Max = surged, ptr.To(surged), surged
	}
	p.Raise = append(p.Raise, c)
	if raised {
		// A record that only names the grown surge is no news.
		p.Events = append(p.Events, e)
	}
	return true
}

// restore decides the bounds of the autoscaler once the surge its record is for is over. Each
// bound that still holds the value set returns to the recorded one; one someone changed since
// stays (theirs wins, Event.Kept names it). A restored bound that would cross another's change
// stays as it is, so that minReplicas never exceeds maxReplicas. With settle, the record stays,
// restored at now (autoscalers).
func (p *Decision) restore(hpa *autoscalingv2.HorizontalPodAutoscaler, rec *surgepolicy.Bounds, now time.Time, settle bool) {
	curMin, curMax := surgepolicy.MinReplicas(hpa), hpa.Spec.MaxReplicas
	ours := func(set *int32, cur int32) bool { return set != nil && *set == cur }
	minReplicas, maxReplicas := hpa.Spec.MinReplicas, curMax
	if ours(rec.SetMinReplicas, curMin) {
		minReplicas = rec.MinReplicas
	}
	if ours(rec.SetMaxReplicas, curMax) {
		maxReplicas = rec.MaxReplicas
	}
	if ptr.Deref(minReplicas, 1) > maxReplicas {
		maxReplicas = curMax // someone raised minReplicas above the recorded maxReplicas
	}
	if ptr.Deref(minReplicas, 1) > maxReplicas {
		minReplicas = hpa.Spec.MinReplicas
	}
	e := Event{Reason: AutoscalerRestored, Autoscaler: hpa.Name, MinWas: curMin, MaxWas: curMax, Min: ptr.Deref(minReplicas, 1), Max: maxReplicas}
	if rec.SetMinReplicas != nil && e.Min != ptr.Deref(rec.MinReplicas, 1) {
		e.Kept = append(e.Kept, "minReplicas")
	}
	if rec.SetMaxReplicas != nil && e.Max != rec.MaxReplicas {
		e.Kept = append(e.Kept, "maxReplicas")
	}
	c := BoundsChange{HPA: hpa, MinReplicas: minReplicas, MaxReplicas: maxReplicas}
	if settle && hpa.Status.ObservedGeneration != nil {
		kept := *rec
		kept.Restored = ptr.To(metav1.NewMicroTime(now))
		c.Record = &kept
		p.RequeueAfter = recheck.Soonest(p.RequeueAfter, SettleTimeout)
	}
	p.Restore = append(p.Restore, c)
	p.Events = append(p.Events, e)
}

// surgeAfter is the surge in progress as the plan leaves it, from state, the one in progress
// before it; nil when none is (none was, or the plan ends it).
func (p *Decision) surgeAfter(state *surgepolicy.State) *surgepolicy.State {
	switch {
	case p.Scale != nil:
		return p.Scale.Surge
	case p.DropSurge:
		return nil
	}
	return state
}

// adoptable is the surge the record of raised bounds of the Deployment's one autoscaler names,
// when the Deployment, which has no surge record, has its surged count: on the raise, the
// autoscaler scaled the Deployment to its raised minReplicas before the responder's own scale
// did, which then found spec.replicas changed. nil otherwise. Whoever may patch the autoscaler
// may write its record, not the Deployment: so the record is only taken when it is nodemaint's
// own as far as anything tells (it names the autoscaler's UID, and a surge naming the
// Deployment's), names a surge nodemaint could have started (maxSurge), and as many pods as it
// surged for are asked to leave or were accepted by the responder (requests and answers the
// autoscaler's writer does not make; Release decides with the requests taken away); a scale-back
// it leads to is bounded besides (Decision.boundScaleDown).
func adoptable(in Input, replicas int32) *surgepolicy.State {
	d := in.Deployment
	if targeting(in.Autoscalers, d.Name) != 1 {
		return nil
	}
	asked := 0
	for _, pod := range livePods(in.Pods) {
		if c := evacuation.Condition(pod, evacuation.Initiated); (evacuation.Requested(pod) ||
			(c != nil && c.Status == corev1.ConditionTrue && c.Reason == surgepolicy.ReasonSurge)) && !timedOut(pod) {
			asked++
		}
	}
	for _, hpa := range in.Autoscalers {
		rec, err := surgepolicy.ParseBounds(hpa)
		if err == nil && rec != nil && rec.Restored == nil && rec.Names(hpa, d) && surgepolicy.Autoscales(hpa, d.Name) &&
			rec.Surged() == replicas && surgeable(d, rec.Surge) && int32(asked) >= rec.Surge.Surge {
			return rec.Surge
		}
	}
	return nil
}

// surgeable reports whether nodemaint could have surged the Deployment as the state says: by
// at most its maxSurge from the original count (0 where it does not surge).
func surgeable(d *appsv1.Deployment, s *surgepolicy.State) bool {
	ms, err := surgepolicy.MaxSurge(d, s.OriginalReplicas)
	return err == nil && s.Surge <= ms
}
