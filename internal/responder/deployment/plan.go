package deployment

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Reasons of the EvacuationInitiated condition the responder sets on a Deployment's pods.
const (
	// ReasonSurge accepts: the pod is moved by surging its Deployment.
	ReasonSurge = "DeploymentSurge"
	// ReasonRecreate declines: the Deployment's strategy is Recreate, it never surges.
	ReasonRecreate = "RecreateStrategy"
	// ReasonMaxSurgeZero declines: the Deployment's maxSurge resolves to 0 pods.
	ReasonMaxSurgeZero = "MaxSurgeZero"
	// ReasonPaused declines: the Deployment is paused, nodemaint does not change it.
	ReasonPaused = "DeploymentPaused"
	// ReasonAutoscaled declines: a HorizontalPodAutoscaler owns the Deployment's replicas and
	// would undo a surge.
	ReasonAutoscaled = "HorizontalPodAutoscaler"
	// ReasonRollout declines: a rollout is in progress (more than one active ReplicaSet); it
	// replaces pods itself, and a surge would be split across its ReplicaSets.
	ReasonRollout = "RolloutInProgress"
	// ReasonSurgeTimedOut declines for good: the surge's replacements did not become available
	// in time. The responder does not accept this pod again while its request stands.
	ReasonSurgeTimedOut = "SurgeTimedOut"
)

// lowestDeletionCost is the pod-deletion-cost of the pods a ReplicaSet is to remove first.
const lowestDeletionCost = math.MinInt32

// gatherRequests is how long a wave that is not full waits for more requests after the last
// one: a requester sets the requests of a node's pods one by one.
const gatherRequests = time.Second

// surgeState is the value of evacuation.SurgeAnnotation: a surge in progress.
type surgeState struct {
	// OriginalReplicas is the Deployment's spec.replicas before the surge, and after it.
	OriginalReplicas int32 `json:"originalReplicas"`
	// Surge is the number of replicas added: the number of pods evacuated by this wave.
	Surge int32 `json:"surge"`
	// StartTime is when the surge started; it gives up once its pods made no progress for its
	// patience since then (see lastProgress and patience).
	StartTime metav1.MicroTime `json:"startTime"`
}

func (s *surgeState) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// parseSurge reads the surge in progress from the Deployment, nil when there is none.
func parseSurge(d *appsv1.Deployment) (*surgeState, error) {
	v, ok := d.Annotations[evacuation.SurgeAnnotation]
	if !ok {
		return nil, nil
	}
	s := &surgeState{}
	if err := json.Unmarshal([]byte(v), s); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", evacuation.SurgeAnnotation, err)
	}
	if s.OriginalReplicas < 0 || s.Surge <= 0 || s.StartTime.IsZero() {
		return nil, fmt.Errorf("annotation %s: invalid value %q", evacuation.SurgeAnnotation, v)
	}
	return s, nil
}

// MaxSurge resolves the Deployment's rolling update maxSurge against replicas as the Deployment
// controller does: a percentage rounds up. It is 0 for the Recreate strategy.
func MaxSurge(d *appsv1.Deployment, replicas int32) (int32, error) {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return 0, nil
	}
	// The API server defaults maxSurge to 25%.
	surge := intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(replicas), true)
	if err != nil {
		return 0, fmt.Errorf("maxSurge: %w", err)
	}
	return int32(max(v, 0)), nil
}

// eligibility says whether the responder surges a Deployment for its pods' evacuation.
type eligibility struct {
	ok bool
	// surge is the resolved maxSurge, when ok.
	surge int32
	// reason and message decline the requests when not ok; an empty reason leaves them
	// unanswered.
	reason, message string
}

// eligible decides whether a Deployment of the given (original) replicas can surge.
func eligible(d *appsv1.Deployment, replicas int32, activeReplicaSets int, autoscaled bool) eligibility {
	surge, err := MaxSurge(d, replicas)
	switch {
	case replicas == 0:
		// Nothing to surge: its remaining pods are terminating.
		return eligibility{}
	case d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType:
		return eligibility{reason: ReasonRecreate, message: "the Deployment's strategy is " + string(d.Spec.Strategy.Type) + ", it does not surge"}
	case err != nil:
		return eligibility{reason: ReasonMaxSurgeZero, message: err.Error()}
	case surge == 0:
		return eligibility{reason: ReasonMaxSurgeZero, message: "the Deployment's maxSurge is 0: eviction moves its pods"}
	case d.Spec.Paused:
		return eligibility{reason: ReasonPaused, message: "the Deployment is paused: eviction moves its pods"}
	case autoscaled:
		return eligibility{reason: ReasonAutoscaled, message: "a HorizontalPodAutoscaler sets the Deployment's replicas and would undo a surge: eviction moves its pods"}
	case activeReplicaSets > 1:
		return eligibility{reason: ReasonRollout, message: "a rollout is in progress: eviction moves its pods"}
	}
	return eligibility{ok: true, surge: surge}
}

// input is what the responder observed of one Deployment.
type input struct {
	deployment  *appsv1.Deployment
	replicaSets []*appsv1.ReplicaSet
	// pods are the pods of the replicaSets, terminating or not.
	pods []*corev1.Pod
	// autoscaled: a HorizontalPodAutoscaler targets the Deployment.
	autoscaled   bool
	now          time.Time
	surgeTimeout time.Duration
}

// answer sets (status True or False) or removes (empty status) a pod's EvacuationInitiated.
type answer struct {
	pod             *corev1.Pod
	status          corev1.ConditionStatus
	reason, message string
}

// scaleChange is a write of the Deployment's spec.replicas and surge state, in one patch.
type scaleChange struct {
	replicas int32
	// surge is the new surge state; nil removes it.
	surge *surgeState
}

// deploymentEvent is an Event on the Deployment.
type deploymentEvent struct {
	eventType, reason, action, message string
}

// plan is what the responder does to one Deployment and its pods, in this order: answers,
// unmark, mark, then the Deployment's scale.
type plan struct {
	answers []answer
	// unmark restores the pods' deletion cost; mark lowers it, so that the ReplicaSet removes
	// them first when the Deployment scales down.
	unmark, mark []*corev1.Pod
	// scale is nil when spec.replicas and the surge state stay.
	scale *scaleChange
	// dropSurge removes an unusable surge state and leaves spec.replicas alone.
	dropSurge bool
	events    []deploymentEvent
	// ready: the Deployment answers its pods' evacuation requests by surging (the ReplicaSets'
	// evacuation-ready marker).
	ready bool
	// requeueAfter is when to look again if nothing changes before: the surge's deadline.
	requeueAfter time.Duration
}

// decide is the responder's state machine for one Deployment. It is level-based: the state is
// the Deployment's spec.replicas and surge annotation and the pods' conditions and marks, so a
// decision taken again after a crash, at any point of carrying out an earlier one, converges.
func decide(in input) plan {
	d := in.deployment
	var p plan
	state, err := parseSurge(d)
	if err != nil {
		// Without the state nobody knows which replica count the user wants: leave replicas
		// alone and let eviction move the pods.
		p.dropSurge = true
		p.events = append(p.events, deploymentEvent{corev1.EventTypeWarning, "InvalidSurgeState", "Surge",
			fmt.Sprintf("%v; removed it and left spec.replicas at %d", err, ptr.Deref(d.Spec.Replicas, 1))})
		state = nil
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	live := make([]*corev1.Pod, 0, len(in.pods))
	for _, pod := range in.pods {
		if pod.DeletionTimestamp.IsZero() {
			live = append(live, pod)
		}
	}
	active := 0
	for _, rs := range in.replicaSets {
		if ptr.Deref(rs.Spec.Replicas, 1) > 0 || rs.Status.Replicas > 0 {
			active++
		}
	}

	if state != nil && replicas != state.OriginalReplicas+state.Surge {
		// Someone else (a person, a GitOps tool) scaled the Deployment during the surge: their
		// count is what the Deployment keeps. The wave ends; a new one may start from there.
		p.dropSurge = true
		p.events = append(p.events, deploymentEvent{corev1.EventTypeWarning, "ScaledDuringSurge", "Surge",
			fmt.Sprintf("spec.replicas was set to %d during a surge from %d to %d; keeping %d", replicas,
				state.OriginalReplicas, state.OriginalReplicas+state.Surge, replicas)})
		p.unmark = marked(live)
		state = nil
	}
	original := replicas
	if state != nil {
		original = state.OriginalReplicas
	}
	el := eligible(d, original, active, in.autoscaled)
	p.ready = el.ok

	giveUp := false
	if state != nil && el.ok {
		created := surgePods(live, state)
		progress := lastProgress(created, state)
		deadline := progress.Add(patience(d, in.replicaSets, created, in.surgeTimeout))
		wave := marked(live)
		available := d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedReplicas >= replicas && d.Status.AvailableReplicas >= replicas
		switch {
		case slices.ContainsFunc(wave, func(pod *corev1.Pod) bool { return !evacuation.Requested(pod) }):
			p.rollback(live, state, "the evacuation of "+podNames(withdrawn(wave))+" was withdrawn")
		case available:
			p.scale = &scaleChange{replicas: state.OriginalReplicas}
			p.events = append(p.events, deploymentEvent{corev1.EventTypeNormal, "SurgeCompleted", "Surge",
				fmt.Sprintf("%d replacements are available; scaled back to %d replicas, which removes %s",
					state.Surge, state.OriginalReplicas, podNames(wave))})
		case !in.now.Before(deadline):
			giveUp = true
			p.rollback(live, state, fmt.Sprintf("the replacements made no progress for %v (%v after the surge started)",
				deadline.Sub(progress).Round(time.Second), in.now.Sub(state.StartTime.Time).Round(time.Second)))
		default:
			p.requeueAfter = deadline.Sub(in.now)
		}
	} else if state != nil {
		p.rollback(live, state, el.message)
	}

	for _, pod := range live {
		cond := evacuation.Condition(pod, evacuation.Initiated)
		switch {
		case !evacuation.Requested(pod):
			if cond != nil {
				p.answers = append(p.answers, answer{pod: pod})
			}
		case timedOut(pod):
		case giveUp:
			p.answers = append(p.answers, answer{pod, corev1.ConditionFalse, ReasonSurgeTimedOut,
				"the Deployment's surge did not become available in time: eviction moves the pod"})
		case el.ok:
			if cond == nil || cond.Status != corev1.ConditionTrue {
				p.answers = append(p.answers, answer{pod, corev1.ConditionTrue, ReasonSurge,
					fmt.Sprintf("Deployment %s surges a replacement before the pod is removed", d.Name)})
			}
		case el.reason != "":
			if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != el.reason {
				p.answers = append(p.answers, answer{pod, corev1.ConditionFalse, el.reason, el.message})
			}
		}
	}
	p.answerEvents(giveUp)
	if state != nil || p.dropSurge {
		return p
	}

	// No surge in progress. Marks left over from an earlier wave or rollback go, once the
	// ReplicaSet removed the pods it was to remove.
	if int32(len(live)) > replicas {
		return p
	}
	var candidates []*corev1.Pod
	for _, pod := range live {
		if el.ok && evacuation.Requested(pod) && !timedOut(pod) {
			candidates = append(candidates, pod)
		} else if isMarked(pod) {
			p.unmark = append(p.unmark, pod)
		}
	}
	steady := d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == replicas &&
		d.Status.UpdatedReplicas == replicas && int32(len(live)) == replicas
	if len(candidates) == 0 || !steady {
		return p
	}
	if int32(len(candidates)) < el.surge {
		var last time.Time
		for _, pod := range candidates {
			if t := requestTime(pod); t.After(last) {
				last = t
			}
		}
		if wait := last.Add(gatherRequests).Sub(in.now); wait > 0 && !last.After(in.now) {
			p.requeueAfter = wait
			return p
		}
	}
	// Pods marked by a wave that did not start (the process stopped) go first, then the oldest
	// requests.
	slices.SortFunc(candidates, func(a, b *corev1.Pod) int {
		if isMarked(a) != isMarked(b) {
			if isMarked(a) {
				return -1
			}
			return 1
		}
		if c := requestTime(a).Compare(requestTime(b)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	k := min(el.surge, int32(len(candidates)))
	wave := candidates[:k]
	for _, pod := range wave {
		if !isMarked(pod) {
			p.mark = append(p.mark, pod)
		}
	}
	for _, pod := range candidates[k:] {
		if isMarked(pod) {
			p.unmark = append(p.unmark, pod)
		}
	}
	p.scale = &scaleChange{replicas: replicas + k, surge: &surgeState{
		OriginalReplicas: replicas, Surge: k, StartTime: metav1.NewMicroTime(in.now),
	}}
	p.events = append(p.events, deploymentEvent{corev1.EventTypeNormal, "SurgeStarted", "Surge",
		fmt.Sprintf("scaling from %d to %d replicas to evacuate %s; %s wait for a later wave",
			replicas, replicas+k, podNames(wave), count(candidates[k:]))})
	p.requeueAfter = in.surgeTimeout + time.Duration(d.Spec.MinReadySeconds)*time.Second
	return p
}

// surgePods are the pods a surge created: the newest ones created since it started (creation
// times are in seconds) that nobody asked to leave, at most its size.
func surgePods(live []*corev1.Pod, state *surgeState) []*corev1.Pod {
	var created []*corev1.Pod
	for _, pod := range live {
		if !pod.CreationTimestamp.Time.Before(state.StartTime.Truncate(time.Second)) && !evacuation.Requested(pod) {
			created = append(created, pod)
		}
	}
	slices.SortFunc(created, func(a, b *corev1.Pod) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	return created[:min(len(created), int(state.Surge))]
}

// lastProgress is when the surge last moved: its start, or the latest time one of the pods it
// created (surgePods) was created, scheduled, initialized or became ready. A surge gives up
// only after its patience without progress, as a Deployment's progressDeadlineSeconds counts:
// on a busy cluster the scheduler may take minutes to place every replacement of every
// Deployment surging at once, and a surge whose pods keep arriving is slow, not stuck. Giving
// it up would throw its replacements away and evict the pods instead.
func lastProgress(created []*corev1.Pod, state *surgeState) time.Time {
	last := state.StartTime.Time
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	for _, pod := range created {
		later(pod.CreationTimestamp.Time)
		for _, c := range pod.Status.Conditions {
			switch c.Type {
			case corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady:
				if c.Status == corev1.ConditionTrue {
					later(c.LastTransitionTime.Time)
				}
			}
		}
	}
	return last
}

// patience is how long a surge may make no progress before it gives up. The surge timeout is
// the bound for replacements that show a problem: one that cannot be placed (no capacity, every
// other node cordoned), one whose containers fail to start, or a ReplicaSet that fails to create
// them (a quota, an admission webhook). A surge that is only slow, its replacements waiting for
// kube-controller-manager, the scheduler or their kubelets on a busy cluster (slow image pulls),
// waits as it would for any scale-up of the Deployment: up to the Deployment's own
// progressDeadlineSeconds when that is longer, the bound after which its owner considers a
// rollout stuck. minReadySeconds comes on top.
func patience(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, created []*corev1.Pod, surgeTimeout time.Duration) time.Duration {
	wait := surgeTimeout
	if !slices.ContainsFunc(created, inTrouble) && !slices.ContainsFunc(replicaSets, failingToCreate) {
		progressDeadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, defaultProgressDeadlineSeconds)) * time.Second
		wait = max(wait, progressDeadline)
	}
	return wait + time.Duration(d.Spec.MinReadySeconds)*time.Second
}

// defaultProgressDeadlineSeconds is the API server's default of a Deployment's
// spec.progressDeadlineSeconds.
const defaultProgressDeadlineSeconds = 600

// failedToStart are the reasons of a waiting container that a kubelet gives when the container
// does not start and will not without a change (an image that does not exist, a missing Secret)
// or keeps failing.
var failedToStart = []string{"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}

// inTrouble reports whether a replacement shows that it may never become Ready: the scheduler
// found no node for it, it failed, or one of its containers waits on a failure.
func inTrouble(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if c := evacuation.Condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return true
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.State.Waiting != nil && slices.Contains(failedToStart, cs.State.Waiting.Reason) {
				return true
			}
		}
	}
	return false
}

// failingToCreate reports whether the ReplicaSet controller fails to create the ReplicaSet's
// pods (condition ReplicaFailure, e.g. a quota exceeded).
func failingToCreate(rs *appsv1.ReplicaSet) bool {
	return slices.ContainsFunc(rs.Status.Conditions, func(c appsv1.ReplicaSetCondition) bool {
		return c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue
	})
}

// rollback ends a surge without completing it: the pods the surge created are marked to go
// first, the evacuated pods unmarked, and spec.replicas returns to the original count.
func (p *plan) rollback(live []*corev1.Pod, state *surgeState, why string) {
	created := surgePods(live, state)
	for _, pod := range live {
		switch in := slices.Contains(created, pod); {
		case in && !isMarked(pod):
			p.mark = append(p.mark, pod)
		case !in && isMarked(pod):
			p.unmark = append(p.unmark, pod)
		}
	}
	p.scale = &scaleChange{replicas: state.OriginalReplicas}
	p.events = append(p.events, deploymentEvent{corev1.EventTypeNormal, "SurgeRolledBack", "Surge",
		fmt.Sprintf("%s; scaled back to %d replicas, which removes the surge's pods %s", why, state.OriginalReplicas, podNames(created))})
}

// answerEvents reports the answers that change the pods' EvacuationInitiated. The answers are
// carried out before the rollback of a surge that gave up: if the process stops in between, the
// next decision still knows it gave up.
func (p *plan) answerEvents(gaveUp bool) {
	var accepted, declined []*corev1.Pod
	reason, message := "", ""
	for _, a := range p.answers {
		switch a.status {
		case corev1.ConditionTrue:
			accepted = append(accepted, a.pod)
		case corev1.ConditionFalse:
			declined = append(declined, a.pod)
			reason, message = a.reason, a.message
		}
	}
	if len(accepted) > 0 {
		p.events = append(p.events, deploymentEvent{corev1.EventTypeNormal, "EvacuationAccepted", "Evacuate",
			fmt.Sprintf("accepted the evacuation of %s (%s): they leave once surged replacements are available", count(accepted), podNames(accepted))})
	}
	switch {
	case gaveUp:
		p.events = append(p.events, deploymentEvent{corev1.EventTypeWarning, "SurgeTimedOut", "Evacuate",
			fmt.Sprintf("gave up the evacuation of %s (%s): %s", count(declined), podNames(declined), message)})
	case len(declined) > 0:
		p.events = append(p.events, deploymentEvent{corev1.EventTypeNormal, "EvacuationDeclined", "Evacuate",
			fmt.Sprintf("declined the evacuation of %s (%s), %s: %s", count(declined), podNames(declined), reason, message)})
	}
}

// isMarked reports whether the responder lowered the pod's deletion cost.
func isMarked(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[evacuation.OriginalDeletionCostAnnotation]
	return ok
}

func marked(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if isMarked(pod) {
			out = append(out, pod)
		}
	}
	return out
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
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == ReasonSurgeTimedOut
}

func requestTime(pod *corev1.Pod) time.Time {
	if c := evacuation.Condition(pod, evacuation.Request); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// count says how many pods there are, for a message.
func count(pods []*corev1.Pod) string {
	if len(pods) == 1 {
		return "1 pod"
	}
	return strconv.Itoa(len(pods)) + " pods"
}

// podNames lists a few pod names for a message.
func podNames(pods []*corev1.Pod) string {
	const most = 5
	names := make([]string, 0, most)
	for i, pod := range pods {
		if i == most {
			return strings.Join(names, ", ") + " and " + strconv.Itoa(len(pods)-most) + " more"
		}
		names = append(names, pod.Name)
	}
	if len(names) == 0 {
		return "no pods"
	}
	return strings.Join(names, ", ")
}

// markers are the annotations the responder keeps on a ReplicaSet: the number of its pods with
// an evacuation request and, while the Deployment answers them by surging, evacuation-ready.
// Copies of the Deployment's own nodemaint annotations, which the Deployment controller puts on
// its newest ReplicaSet, are removed once the Deployment no longer has them. A nil value
// removes the annotation.
func markers(rs *appsv1.ReplicaSet, pods []*corev1.Pod, ready bool, deploymentAnnotations map[string]string) map[string]*string {
	n := 0
	for _, pod := range pods {
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == rs.UID && pod.DeletionTimestamp.IsZero() && evacuation.Requested(pod) {
			n++
		}
	}
	want := map[string]*string{
		evacuation.ReplicasToEvacuateAnnotation: nil,
		evacuation.EvacuationReadyAnnotation:    nil,
	}
	if n > 0 {
		want[evacuation.ReplicasToEvacuateAnnotation] = ptr.To(strconv.Itoa(n))
		if ready {
			want[evacuation.EvacuationReadyAnnotation] = ptr.To("true")
		}
	}
	for _, key := range []string{evacuation.SurgeAnnotation, evacuation.DeploymentReplicasToEvacuateAnnotation} {
		if _, copied := deploymentAnnotations[key]; !copied {
			want[key] = nil
		}
	}
	return want
}

// toEvacuate counts the pods with an evacuation request, for the Deployment's marker.
func toEvacuate(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp.IsZero() && evacuation.Requested(pod) {
			n++
		}
	}
	return n
}
