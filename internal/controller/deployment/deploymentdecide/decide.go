package deploymentdecide

// The decision: what the responder does to one Deployment and its pods, from what it observed
// and the time. internal/controller/deployment observes and applies it; its Release reuses it.

import (
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// gatherRequests is how long a wave that is not full waits for more requests after the last
// one: a requester sets the requests of a node's pods one by one.
const gatherRequests = time.Second

// Input is what the responder observed of one Deployment.
type Input struct {
	Deployment  *appsv1.Deployment
	ReplicaSets []*appsv1.ReplicaSet
	// Pods are the pods of the ReplicaSets, terminating or not.
	Pods []*corev1.Pod
	// Autoscalers are the HorizontalPodAutoscalers of the Deployment's namespace that target it
	// (surgepolicy.Autoscales) or whose record of raised bounds names it
	// (evacuation.SurgeBoundsAnnotation).
	Autoscalers  []*autoscalingv2.HorizontalPodAutoscaler
	Now          time.Time
	SurgeTimeout time.Duration
}

// Answer sets (Status True or False) or removes (empty Status) a pod's EvacuationInitiated:
// its reason and the facts its message tells (Message, messages.go).
type Answer struct {
	Pod    *corev1.Pod
	Status corev1.ConditionStatus
	Reason string
	// Deployment names the Deployment that surges for the pod (an acceptance).
	Deployment string
	// PolicyMessage is surgepolicy's explanation of why the Deployment does not surge (a decline).
	PolicyMessage string
}

// ScaleChange is a write of the Deployment's spec.replicas and surge state, in one patch.
type ScaleChange struct {
	Replicas int32
	// Surge is the new surge state; nil removes it.
	Surge *surgepolicy.State
}

// EventReason is what an Event on the Deployment reports; its value is the Event's reason.
type EventReason string

const (
	// SurgeStarted: a wave starts, the Deployment scaled up by the surge.
	SurgeStarted EventReason = "SurgeStarted"
	// SurgeExtended: the surge in progress grows for pods asked to leave since it started.
	SurgeExtended EventReason = "SurgeExtended"
	// SurgeCompleted: the surge's replacements are available; the Deployment scales back.
	SurgeCompleted EventReason = "SurgeCompleted"
	// SurgeRolledBack: the surge ends without completing (Event.Rollback says why).
	SurgeRolledBack EventReason = "SurgeRolledBack"
	// SurgeTimedOut: the responder gave up the evacuation of the surge's pods.
	SurgeTimedOut EventReason = "SurgeTimedOut"
	// EvacuationAccepted: pods asked to leave are accepted.
	EvacuationAccepted EventReason = "EvacuationAccepted"
	// EvacuationDeclined: pods asked to leave are declined, the Deployment not surging.
	EvacuationDeclined EventReason = "EvacuationDeclined"
	// InvalidSurgeState: an unusable surge record is removed.
	InvalidSurgeState EventReason = "InvalidSurgeState"
	// ScaledDuringSurge: someone scaled the Deployment during a surge; their count stays.
	ScaledDuringSurge EventReason = "ScaledDuringSurge"
	// SurgeAdopted: the Deployment's autoscaler scaled it to the surged count (its raised
	// minReplicas) before the responder did; the surge record is written and the surge goes on.
	SurgeAdopted EventReason = "SurgeAdopted"
	// AutoscalerRaised: the bounds of the Deployment's HorizontalPodAutoscaler are raised to
	// the surged count (Event.Autoscaler, Replicas, MinWas, MaxWas, Min, Max).
	AutoscalerRaised EventReason = "AutoscalerBoundsRaised"
	// AutoscalerRestored: the surge is over, the autoscaler's bounds are restored
	// (Event.Autoscaler, MinWas, MaxWas, Min, Max; Kept names those someone changed since).
	AutoscalerRestored EventReason = "AutoscalerBoundsRestored"
	// InvalidBoundsRecord: an unusable record of raised bounds is removed from the autoscaler
	// (Event.Autoscaler, Problem), its bounds left as they are.
	InvalidBoundsRecord EventReason = "InvalidBoundsRecord"
	// AutoscaledSurgeUndone: the autoscaler scaled the Deployment to the count of the surge that
	// is over, from the raised minReplicas before it saw them restored; scaled back
	// (Event.Autoscaler, Original, Surge).
	AutoscaledSurgeUndone EventReason = "AutoscaledSurgeUndone"
	// ReplicasReverted: surges of the Deployment were set back to the count before them
	// surgepolicy.RevertLimit times (Event.Reverts; the last from Original+Surge to Replicas):
	// something reverts its replicas, its pods are declined.
	ReplicasReverted EventReason = "ReplicasReverted"
	// ScaleBackBounded: a record would have the Deployment scaled back below what nodemaint
	// could have set (below 1, the autoscaler's own minReplicas, or by more than maxSurge):
	// scaled back to Replicas instead of Original (Event.Min is the floor).
	ScaleBackBounded EventReason = "ScaleBackBounded"
)

// RollbackReason is why a surge is rolled back.
type RollbackReason string

const (
	// RollbackIneligible: the Deployment can no longer surge (Event.PolicyMessage says why).
	RollbackIneligible RollbackReason = "Ineligible"
	// RollbackWithdrawn: fewer pods than the surge's size are still to be evacuated
	// (Event.Asked; Event.Withdrawn names the marked pods whose request was withdrawn).
	RollbackWithdrawn RollbackReason = "Withdrawn"
	// RollbackNoProgress: the replacements made no progress for the surge's patience
	// (Event.Patience; Event.Elapsed since the surge started).
	RollbackNoProgress RollbackReason = "NoProgress"
	// RollbackReleased: nodemaint's Deployment responder is being removed (Release).
	RollbackReleased RollbackReason = "Released"
)

// Event is an Event on the Deployment: what happened (Reason) and the facts its note tells
// (Note, messages.go). Each reason uses the facts its constant names; the others are zero.
type Event struct {
	Reason EventReason
	// Original is the Deployment's replica count without a surge; Surge is the surge's size (its
	// replacements) as the Event leaves it, Was its size before (0 when it starts).
	Original, Surge, Was int32
	// Replicas is spec.replicas as someone set it (ScaledDuringSurge), or as it stays
	// (InvalidSurgeState).
	Replicas int32
	// Asked counts the pods asked to leave that the surge evacuates.
	Asked int
	// Pods names the pods the Event is about: those a wave starts for, those a completed surge
	// evacuates, a rolled-back surge's own, the declined or given up.
	Pods []string
	// Rollback is why a surge is rolled back, with the facts that go with it: Withdrawn,
	// Patience and Elapsed.
	Rollback          RollbackReason
	Withdrawn         []string
	Patience, Elapsed time.Duration
	// PolicyReason and PolicyMessage are surgepolicy's reason and explanation of why the
	// Deployment does not surge.
	PolicyReason, PolicyMessage string
	// Problem says what is wrong with an unusable surge record or record of raised bounds.
	Problem string
	// Reverts counts the surges of the evacuation set back to the count before them
	// (ScaledDuringSurge, ReplicasReverted).
	Reverts int32
	// Autoscaler names the HorizontalPodAutoscaler whose bounds change: from minReplicas
	// MinWas and maxReplicas MaxWas to Min and Max; Kept names the bounds a restore leaves as
	// someone else set them.
	Autoscaler               string
	MinWas, MaxWas, Min, Max int32
	Kept                     []string
}

// Series reports whether the Event is the same each time, whatever the Deployment's version,
// so that the event recorder makes them one series (a count) instead of an Event each: the
// acceptances (see answerEvents).
func (e Event) Series() bool { return e.Reason == EvacuationAccepted }

// OfAutoscaler reports whether the Event is about an autoscaler's bounds, written before the
// Deployment.
func (e Event) OfAutoscaler() bool {
	return e.Reason == AutoscalerRaised || e.Reason == AutoscalerRestored || e.Reason == InvalidBoundsRecord
}

// Decision is what the responder does to one Deployment and its pods, in this order: the pods'
// answers and marks, the autoscaler's bounds (Raise or Restore), then the Deployment's scale.
type Decision struct {
	Answers []Answer
	// Unmark restores the pods' deletion cost; Mark lowers it, so that the ReplicaSet removes
	// them first when the Deployment scales down. A pod's mark and its answer are one write.
	Unmark, Mark []*corev1.Pod
	// RolledBack: the surge is rolled back, whose marks (Rollback) are the plan's.
	RolledBack bool
	// Scale is nil when spec.replicas and the surge state stay.
	Scale *ScaleChange
	// DropSurge removes an unusable surge state and leaves spec.replicas alone.
	DropSurge bool
	// Reverted is the new count of the evacuation's surges set back (written with the
	// Deployment's scale, or with DropSurge); DropReverted removes it (the evacuation is over, or
	// it is not nodemaint's).
	Reverted     *surgepolicy.Reverted
	DropReverted bool
	// Raise holds the autoscaler's bounds at the surged count: written before the Deployment's
	// scale, which waits for it. Restore returns them once the surge is over: in a decision that
	// finds the Deployment scaled back (Decide).
	Raise, Restore []BoundsChange
	Events         []Event
	// Ready: the Deployment answers its pods' evacuation requests by surging (the ReplicaSets'
	// evacuation-ready marker).
	Ready bool
	// MoreSteps: the evacuation writes the Deployment again in a later step (a surge is in
	// progress, or pods it evacuates wait for a wave), so the counts of pods to evacuate whose
	// value alone changes wait for that write (CountCanWait).
	MoreSteps bool
	// RequeueAfter is when to look again if nothing changes before: the surge's deadline.
	RequeueAfter time.Duration
}

// Decide is the responder's state machine for one Deployment. It is level-based: the state is
// the Deployment's spec.replicas and surge annotation, the pods' conditions and marks, and the
// autoscaler's bounds and their record, so a
// decision taken again after a crash, at any point of carrying out an earlier one, converges.
func Decide(in Input) Decision {
	var p Decision
	replicas := ptr.Deref(in.Deployment.Spec.Replicas, 1)
	live := livePods(in.Pods)
	reverted := p.readReverted(in.Deployment)
	state := p.readSurge(in.Deployment)
	state = p.keepScale(in.Deployment, state, replicas, reverted)
	if p.Reverted != nil {
		reverted = p.Reverted
	}
	adopted := state == nil && !p.DropSurge
	if adopted {
		state = adoptable(in, replicas)
		adopted = state != nil
	}
	original := replicas
	if state != nil {
		original = state.OriginalReplicas
	}
	el := reverted.Eligible(surgepolicy.Eligible(in.Deployment, original, surgepolicy.ActiveReplicaSets(in.ReplicaSets), targeting(in.Autoscalers, in.Deployment.Name)))
	p.Ready = el.OK
	gaveUp := p.endSurge(in, live, state, el, replicas)
	p.answerPods(in.Deployment, live, el, gaveUp)
	if !p.RolledBack {
		p.markEvacuated(live, el, state != nil, replicas)
	}
	p.MoreSteps = state != nil || len(evacuated(live, el)) > 0
	if state == nil && !p.DropSurge && !surgeRecorded(in.Deployment) {
		p.undoAutoscaled(in, replicas)
	}
	// With a surge in progress or ended now, the next wave is for a later decision; nor does one
	// start while the autoscaler holds another Deployment's raised bounds, or the last surge's
	// restored ones unsettled.
	if state == nil && !p.DropSurge && !boundsTaken(in.Autoscalers, in.Deployment.Name) {
		p.startWave(in, live, el, replicas)
	}
	if adopted && p.Scale == nil {
		// The surge goes on: its record is written on the Deployment.
		p.Scale = &ScaleChange{Replicas: replicas, Surge: state}
		p.Events = append(p.Events, Event{Reason: SurgeAdopted, Original: state.OriginalReplicas, Surge: state.Surge})
	}
	// Bounds raised for a surge stay until a decision finds the Deployment without it, its
	// scale-back done: restored with the scale-back, the autoscaler, woken by the write, would
	// scale the Deployment down itself, racing the responder; restored after it, an autoscaler
	// that scaled the Deployment up again in between finds its record kept, and the surge is
	// adopted again. Restored, the record stays until the autoscaler settled (undoAutoscaled).
	if surge := p.surgeAfter(state); surge != nil || (state == nil && !surgeRecorded(in.Deployment)) {
		p.autoscalers(in.Autoscalers, in.Deployment.Name, surge, in.Now, true)
	}
	// The count of surges set back is the evacuation's: it goes once nothing is asked to leave.
	if _, recorded := in.Deployment.Annotations[evacuation.SurgeRevertedAnnotation]; recorded && !p.DropReverted &&
		p.surgeAfter(state) == nil && !slices.ContainsFunc(live, evacuation.Requested) {
		p.Reverted, p.DropReverted = nil, true
	}
	p.boundScaleDown(in, replicas)
	return p
}

// boundScaleDown keeps a scale-down of the plan, which records alone decide (the count before a
// surge, in the Deployment's record or its autoscaler's), within what nodemaint itself could
// have set, whatever the records say: never to 0, never below the minReplicas of an autoscaler
// that targets the Deployment as its owner set it (surgepolicy.OwnMinReplicas), never by more
// than the Deployment's maxSurge from the count it goes to (where maxSurge resolves to more
// than 0: a Deployment whose strategy changed to Recreate during a surge has it rolled back).
func (p *Decision) boundScaleDown(in Input, replicas int32) {
	if p.Scale == nil || p.Scale.Replicas >= replicas {
		return
	}
	want := p.Scale.Replicas
	floor := ScaleDownFloor(in.Deployment, in.Autoscalers)
	to := max(want, floor)
	for ; to < replicas; to++ {
		if ms, err := surgepolicy.MaxSurge(in.Deployment, to); err != nil || ms == 0 || replicas-to <= ms {
			break
		}
	}
	if to == want {
		return
	}
	p.Scale.Replicas = to
	p.Events = append(p.Events, Event{Reason: ScaleBackBounded, Original: want, Replicas: to, Min: floor})
}

// ScaleDownFloor is the count below which the responder never scales the Deployment: 1, or the
// highest minReplicas of the autoscalers that target it, as their owners set them.
func ScaleDownFloor(d *appsv1.Deployment, hpas []*autoscalingv2.HorizontalPodAutoscaler) int32 {
	floor := int32(1)
	for _, hpa := range hpas {
		if surgepolicy.Autoscales(hpa, d.Name) {
			floor = max(floor, surgepolicy.OwnMinReplicas(hpa, d.Name))
		}
	}
	return floor
}

// readReverted reads the count of the evacuation's surges set back; one that is not nodemaint's
// is removed, with an Event, and counts as none.
func (p *Decision) readReverted(d *appsv1.Deployment) *surgepolicy.Reverted {
	rev, err := surgepolicy.ParseReverted(d)
	if err != nil {
		p.DropReverted = true
		p.Events = append(p.Events, Event{Reason: InvalidSurgeState, Problem: err.Error(), Replicas: ptr.Deref(d.Spec.Replicas, 1)})
		return nil
	}
	return rev
}

// surgeRecorded reports whether the Deployment carries a surge record, usable or not.
func surgeRecorded(d *appsv1.Deployment) bool {
	_, ok := d.Annotations[evacuation.SurgeAnnotation]
	return ok
}

// livePods are the pods that are not terminating.
func livePods(pods []*corev1.Pod) []*corev1.Pod {
	live := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		if pod.DeletionTimestamp.IsZero() {
			live = append(live, pod)
		}
	}
	return live
}

// readSurge decides what to make of the Deployment's surge record: the surge in progress, nil
// when there is none. An unusable record is dropped: without it nobody knows which replica
// count the user wants, so spec.replicas stays and eviction moves the pods.
func (p *Decision) readSurge(d *appsv1.Deployment) *surgepolicy.State {
	state, err := surgepolicy.Parse(d)
	if err != nil {
		p.DropSurge = true
		p.Events = append(p.Events, Event{Reason: InvalidSurgeState, Problem: err.Error(), Replicas: ptr.Deref(d.Spec.Replicas, 1)})
		return nil
	}
	return state
}

// keepScale decides whether someone else (a person, a GitOps tool) scaled the Deployment during
// the surge: their count is what the Deployment keeps, so the surge record goes; a new wave may
// start from there. The marks stay: should they scale down, the pods asked to leave go first.
// A count set back to the one before the surge is counted (Decision.Reverted, on the Deployment
// with the record's removal): a GitOps engine that corrects drift sets back every surge, and
// once surgepolicy.RevertLimit were, the pods are declined (surgepolicy.Reverted.Eligible),
// so the drain need not wait for a surge that never stays. It returns the surge still in
// progress.
func (p *Decision) keepScale(d *appsv1.Deployment, state *surgepolicy.State, replicas int32, reverted *surgepolicy.Reverted) *surgepolicy.State {
	if state == nil || replicas == state.OriginalReplicas+state.Surge {
		return state
	}
	p.DropSurge = true
	e := Event{Reason: ScaledDuringSurge, Replicas: replicas, Original: state.OriginalReplicas, Surge: state.Surge}
	if replicas == state.OriginalReplicas {
		n := int32(1)
		if reverted != nil {
			n = reverted.Count + 1
		}
		p.Reverted, p.DropReverted = &surgepolicy.Reverted{UID: d.UID, Count: n, Replicas: replicas}, false
		e.Reverts = n
	}
	p.Events = append(p.Events, e)
	if e.Reverts >= surgepolicy.RevertLimit {
		e.Reason = ReplicasReverted
		p.Events = append(p.Events, e)
	}
	return nil
}

// endSurge decides whether the surge in progress ends now. It is rolled back when the
// Deployment can no longer surge or fewer pods than its size are still to be evacuated (a
// request was withdrawn, a pod removed by someone else): scaling back would then remove a pod
// nobody asked to leave. It is completed once its replacements are available, as the pods show
// it (available: the Deployment's status.availableReplicas comes two status reports later, a
// second or two each on a busy cluster, and would be stale for a wave that starts as soon as
// the last one's scale-back shows in its pods): every pod to be
// evacuated is marked, so the ReplicaSet removes state.Surge of them, any of which may go. It
// is given up (rolled back, its pods declined for good) once they made no progress for its
// patience; until then it is looked at again at that deadline. It reports whether the surge
// gave up.
func (p *Decision) endSurge(in Input, live []*corev1.Pod, state *surgepolicy.State, el surgepolicy.Eligibility, replicas int32) (gaveUp bool) {
	if state == nil {
		return false
	}
	if !el.OK {
		p.Rollback(live, state, Event{Rollback: RollbackIneligible, PolicyReason: el.Reason, PolicyMessage: el.Message})
		return false
	}
	d := in.Deployment
	created := surgePods(live, state)
	progress := lastProgress(created, state)
	deadline := progress.Add(patience(d, in.ReplicaSets, created, in.SurgeTimeout))
	evacuating := evacuated(live, el)
	availablePods, becomesAvailable := available(live, d.Spec.MinReadySeconds, in.Now)
	complete := d.Status.ObservedGeneration >= d.Generation && availablePods >= replicas
	switch {
	case int32(len(evacuating)) < state.Surge:
		p.Rollback(live, state, Event{Rollback: RollbackWithdrawn, Asked: len(evacuating), Withdrawn: names(withdrawn(marks.Marked(live)))})
	case complete:
		p.Scale = &ScaleChange{Replicas: state.OriginalReplicas}
		p.Events = append(p.Events, Event{Reason: SurgeCompleted, Original: state.OriginalReplicas, Surge: state.Surge,
			Asked: len(evacuating), Pods: names(evacuating)})
	case !in.Now.Before(deadline):
		gaveUp = true
		p.Rollback(live, state, Event{Rollback: RollbackNoProgress, Patience: deadline.Sub(progress), Elapsed: in.Now.Sub(state.StartTime.Time)})
	default:
		p.RequeueAfter = recheck.Soonest(deadline.Sub(in.Now), becomesAvailable)
		p.extend(in, live, state, el)
	}
	return gaveUp
}

// available counts the live pods available as the Deployment controller counts them: Ready for
// at least minReadySeconds. becomesAvailable is how long until the next Ready pod that is not
// available yet becomes so; 0 when none waits.
func available(live []*corev1.Pod, minReadySeconds int32, now time.Time) (n int32, becomesAvailable time.Duration) {
	for _, pod := range live {
		switch {
		case podutils.IsPodAvailable(pod, minReadySeconds, metav1.NewTime(now)):
			n++
		case podutils.IsPodReady(pod):
			ready := evacuation.Condition(pod, corev1.PodReady).LastTransitionTime.Time
			wait := ready.Add(time.Duration(minReadySeconds)*time.Second + time.Millisecond).Sub(now)
			becomesAvailable = recheck.Soonest(becomesAvailable, wait)
		}
	}
	return n, becomesAvailable
}

// answerPods decides each pod's EvacuationInitiated, where it changes: removed when the pod is
// no longer asked to leave, False for good when the surge gave up, True when the Deployment
// surges, False with the reason when it declines; left alone when the responder gave the pod up
// earlier or neither accepts nor declines. The changes are reported in Events.
func (p *Decision) answerPods(d *appsv1.Deployment, live []*corev1.Pod, el surgepolicy.Eligibility, gaveUp bool) {
	for _, pod := range live {
		cond := evacuation.Condition(pod, evacuation.Initiated)
		switch {
		case !evacuation.Requested(pod):
			if cond != nil {
				p.Answers = append(p.Answers, Answer{Pod: pod})
			}
		case timedOut(pod):
		case gaveUp:
			p.Answers = append(p.Answers, Answer{Pod: pod, Status: corev1.ConditionFalse, Reason: surgepolicy.ReasonSurgeTimedOut})
		case el.OK:
			if cond == nil || cond.Status != corev1.ConditionTrue {
				p.Answers = append(p.Answers, Answer{Pod: pod, Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge, Deployment: d.Name})
			}
		case el.Reason != "":
			if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != el.Reason {
				p.Answers = append(p.Answers, Answer{Pod: pod, Status: corev1.ConditionFalse, Reason: el.Reason, PolicyMessage: el.Message})
			}
		}
	}
	p.answerEvents(gaveUp)
}

// startWave decides, with no surge in progress, whether a wave starts: once the Deployment is
// steady, it surges by up to maxSurge for the pods asked to leave (marked to go first since
// their acceptance, markEvacuated). A wave that is not full first waits gatherRequests for more
// requests.
func (p *Decision) startWave(in Input, live []*corev1.Pod, el surgepolicy.Eligibility, replicas int32) {
	d := in.Deployment
	if int32(len(live)) > replicas {
		return
	}
	candidates := evacuated(live, el)
	// Steady from the pods themselves: the last wave's scale-back shows as soon as its pods
	// are terminating, two status reports (the ReplicaSet's, then the Deployment's) before the
	// Deployment's status.replicas says so. The Deployment controller has seen the current
	// spec (a rollout would show as a second ReplicaSet, which declines).
	steady := d.Status.ObservedGeneration >= d.Generation && int32(len(live)) == replicas
	if len(candidates) == 0 || !steady {
		return
	}
	if wait := gathering(candidates, el.Surge, in.Now); wait > 0 {
		p.RequeueAfter = wait
		return
	}
	sortWave(candidates)
	k := min(el.Surge, int32(len(candidates)))
	wave := candidates[:k]
	p.Scale = &ScaleChange{Replicas: replicas + k, Surge: &surgepolicy.State{
		OriginalReplicas: replicas, Surge: k, StartTime: metav1.NewMicroTime(in.Now), UID: d.UID,
	}}
	p.Events = append(p.Events, Event{Reason: SurgeStarted, Original: replicas, Surge: k, Asked: len(candidates), Pods: names(wave)})
	p.RequeueAfter = in.SurgeTimeout + time.Duration(d.Spec.MinReadySeconds)*time.Second
}

// evacuated are the pods the Deployment evacuates: those asked to leave that the responder did
// not give up on, when the Deployment surges.
func evacuated(live []*corev1.Pod, el surgepolicy.Eligibility) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range live {
		if el.OK && evacuation.Requested(pod) && !timedOut(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// markEvacuated decides the pods' marks (their lowered deletion cost) outside a rollback: every
// pod the Deployment evacuates is marked, from its acceptance on (the mark is written with the
// answer), so that whichever surge completes, the ReplicaSet's scale-back removes pods asked to
// leave; the other pods' marks go (a withdrawn pod's with the withdrawal of its answer). While
// a scale-down is pending with no surge (more pods than replicas: a rollback's, a completed
// surge's, someone's), no mark is added and a rollback's marks stay: the ReplicaSet is to
// remove the surge's pods, not the evacuated ones. surging: a surge was in progress when the
// plan was made (its completion's scale-back comes after the plan's marks).
func (p *Decision) markEvacuated(live []*corev1.Pod, el surgepolicy.Eligibility, surging bool, replicas int32) {
	hold := !surging && int32(len(live)) > replicas
	for _, pod := range live {
		evacuate := el.OK && evacuation.Requested(pod) && !timedOut(pod)
		switch {
		case evacuate && !marks.IsMarked(pod) && !hold:
			p.Mark = append(p.Mark, pod)
		case !evacuate && marks.IsMarked(pod) && !(hold && rolledBackMark(pod)):
			p.Unmark = append(p.Unmark, pod)
		}
	}
}

// rolledBackMark reports whether the pod is marked for a rollback's scale-down: marked, with
// neither a request nor an answer (a pod a surge created).
func rolledBackMark(pod *corev1.Pod) bool {
	return marks.IsMarked(pod) && !evacuation.Requested(pod) && evacuation.Condition(pod, evacuation.Initiated) == nil
}

// gathering is how long a wave of fewer candidates than maxSurge still waits for more
// requests after the last one; 0 when it starts now.
func gathering(candidates []*corev1.Pod, maxSurge int32, now time.Time) time.Duration {
	if int32(len(candidates)) >= maxSurge {
		return 0
	}
	var last time.Time
	for _, pod := range candidates {
		if t := RequestTime(pod); t.After(last) {
			last = t
		}
	}
	if wait := last.Add(gatherRequests).Sub(now); wait > 0 && !last.After(now) {
		return wait
	}
	return 0
}

// sortWave orders the candidates of a wave, the oldest requests first: those are the pods the
// wave is for, although the ReplicaSet's scale-back may remove any of the marked candidates.
func sortWave(candidates []*corev1.Pod) {
	slices.SortFunc(candidates, func(a, b *corev1.Pod) int {
		if c := RequestTime(a).Compare(RequestTime(b)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// answerEvents reports the answers that change the pods' EvacuationInitiated. The answers are
// carried out before the rollback of a surge that gave up: if the process stops in between, the
// next decision still knows it gave up.
func (p *Decision) answerEvents(gaveUp bool) {
	var accepted, declined []*corev1.Pod
	var last Answer
	for _, a := range p.Answers {
		switch a.Status {
		case corev1.ConditionTrue:
			accepted = append(accepted, a.Pod)
		case corev1.ConditionFalse:
			declined = append(declined, a.Pod)
			last = a
		}
	}
	if len(accepted) > 0 {
		// The note names no pods (their EvacuationInitiated conditions do), and the Event is
		// about the Deployment whatever its version: the acceptances of one Deployment's pods,
		// which come a few at a time from every node, are then one Event series, not one Event
		// (a write) each. An Event about the Deployment as read names its resourceVersion, which
		// each wave changes, which would make an Event of nearly every wave.
		p.Events = append(p.Events, Event{Reason: EvacuationAccepted})
	}
	switch {
	case gaveUp:
		p.Events = append(p.Events, Event{Reason: SurgeTimedOut, Pods: names(declined)})
	case len(declined) > 0:
		p.Events = append(p.Events, Event{Reason: EvacuationDeclined, Pods: names(declined), PolicyReason: last.Reason, PolicyMessage: last.PolicyMessage})
	}
}

func withdrawn(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !evacuation.Requested(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// timedOut reports whether the responder gave up on the pod's evacuation for good.
func timedOut(pod *corev1.Pod) bool {
	c := evacuation.Condition(pod, evacuation.Initiated)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == surgepolicy.ReasonSurgeTimedOut
}

// RequestTime is when the pod was asked to leave (its EvacuationRequest), zero when it is not.
func RequestTime(pod *corev1.Pod) time.Time {
	if c := evacuation.Condition(pod, evacuation.Request); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// names are the pods' names, for the facts of an Event.
func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, pod := range pods {
		out[i] = pod.Name
	}
	return out
}

// SurgeOutcomes maps the reasons of the surge Events a plan emits to the outcome they count as
// in the responder's metric nodemaint_responder_surges_total. A surge that gave up is rolled
// back too: it counts as timed_out alone.
func SurgeOutcomes(events []Event) []string {
	var out []string
	timedOut := false
	for _, e := range events {
		if e.Reason == SurgeTimedOut {
			timedOut = true
		}
	}
	for _, e := range events {
		switch e.Reason {
		case SurgeStarted:
			out = append(out, "started")
		case SurgeCompleted:
			out = append(out, "completed")
		case SurgeTimedOut:
			out = append(out, "timed_out")
		case SurgeRolledBack:
			if !timedOut {
				out = append(out, "rolled_back")
			}
		case ScaledDuringSurge:
			out = append(out, "overridden")
		case InvalidSurgeState:
			out = append(out, "invalid")
		}
	}
	return out
}
