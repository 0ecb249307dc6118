// Package surgepolicy says whether nodemaint's Deployment responder moves a Deployment's pods
// by surging it, and by how many pods: the Deployment's strategy, maxSurge, pause, autoscaler
// and rollout, the surge record it keeps on the Deployment, and the bounds it raises on the
// Deployment's HorizontalPodAutoscaler during a surge. It is the responder's own rule,
// shared with the preflight, which reports what a drain would do, and the plugin's cleanup. It
// does no I/O.
package surgepolicy

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// ReasonAutoscaled declines: more than one HorizontalPodAutoscaler targets the Deployment.
	// The autoscaler controller scales none of them (AmbiguousSelector), and the responder holds
	// the bounds of a single one during a surge (Bounds).
	ReasonAutoscaled = "HorizontalPodAutoscaler"
	// ReasonRollout declines: a rollout is in progress (more than one active ReplicaSet); it
	// replaces pods itself, and a surge would be split across its ReplicaSets.
	ReasonRollout = "RolloutInProgress"
	// ReasonSurgeTimedOut declines for good: the surge's replacements did not become available
	// in time. The responder does not accept this pod again while its request stands.
	ReasonSurgeTimedOut = "SurgeTimedOut"
	// ReasonReplicasReverted declines: something (a GitOps engine's self-heal) set the
	// Deployment's spec.replicas back during its surges, RevertLimit times in this evacuation.
	ReasonReplicasReverted = "ReplicasReverted"
)

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

// Eligibility says whether the responder surges a Deployment for its pods' evacuation.
type Eligibility struct {
	OK bool
	// Surge is the resolved maxSurge, when OK.
	Surge int32
	// Reason and Message decline the requests when not OK; an empty Reason leaves them
	// unanswered.
	Reason, Message string
}

// Eligible decides whether a Deployment of the given (original) replicas can surge; autoscalers
// counts the HorizontalPodAutoscalers that target it (Autoscales). One is no obstacle: the
// responder raises its bounds for the surge (Bounds).
func Eligible(d *appsv1.Deployment, replicas int32, activeReplicaSets, autoscalers int) Eligibility {
	surge, err := MaxSurge(d, replicas)
	switch {
	case replicas == 0:
		// Nothing to Surge: its remaining pods are terminating.
		return Eligibility{}
	case d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType:
		return Eligibility{Reason: ReasonRecreate, Message: "the Deployment's strategy is " + string(d.Spec.Strategy.Type) + ", it does not surge"}
	case err != nil:
		return Eligibility{Reason: ReasonMaxSurgeZero, Message: err.Error()}
	case surge == 0:
		return Eligibility{Reason: ReasonMaxSurgeZero, Message: "the Deployment's maxSurge is 0: eviction moves its pods"}
	case d.Spec.Paused:
		return Eligibility{Reason: ReasonPaused, Message: "the Deployment is paused: eviction moves its pods"}
	case autoscalers > 1:
		return Eligibility{Reason: ReasonAutoscaled, Message: fmt.Sprintf("%d HorizontalPodAutoscalers target the Deployment, which scale it "+
			"in turn or not at all: eviction moves its pods", autoscalers)}
	case activeReplicaSets > 1:
		return Eligibility{Reason: ReasonRollout, Message: "a rollout is in progress: eviction moves its pods"}
	}
	return Eligibility{OK: true, Surge: surge}
}

// Surges says whether the responder answers evacuation requests of the Deployment's pods by
// surging, from its spec, its ReplicaSets and how many HorizontalPodAutoscalers target it (see
// Autoscales); when it does not, reason (one of the Reason constants, "" when it leaves them
// unanswered: the Deployment has no replicas) and message say why, as the pods'
// EvacuationInitiated=False would. It is the responder's own decision, for the preflight.
func Surges(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, autoscalers int) (ok bool, reason, message string) {
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	if state, err := Parse(d); err == nil && state != nil {
		replicas = state.OriginalReplicas
	}
	rev, _ := ParseReverted(d)
	el := rev.Eligible(Eligible(d, replicas, ActiveReplicaSets(replicaSets), autoscalers))
	return el.OK, el.Reason, el.Message
}

// Autoscales reports whether the HorizontalPodAutoscaler scales the named Deployment of its
// namespace.
func Autoscales(hpa *autoscalingv2.HorizontalPodAutoscaler, deployment string) bool {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && ref.Kind == "Deployment" && ref.Name == deployment && (gv.Group == appsv1.GroupName || gv.Group == "extensions")
}

// ActiveReplicaSets counts the ReplicaSets that want or have pods.
func ActiveReplicaSets(replicaSets []*appsv1.ReplicaSet) int {
	active := 0
	for _, rs := range replicaSets {
		if ptr.Deref(rs.Spec.Replicas, 1) > 0 || rs.Status.Replicas > 0 {
			active++
		}
	}
	return active
}

// State is the value of evacuation.SurgeAnnotation: a surge in progress.
type State struct {
	// OriginalReplicas is the Deployment's spec.replicas before the surge, and after it.
	OriginalReplicas int32 `json:"originalReplicas"`
	// Surge is the number of replicas added: the number of pods evacuated by this wave.
	Surge int32 `json:"surge"`
	// StartTime is when the surge started; it gives up once its pods made no progress for its
	// patience since then (see lastProgress and patience).
	StartTime metav1.MicroTime `json:"startTime"`
	// UID is the UID of the Deployment the record is written on: a record naming another is
	// not nodemaint's (copied from another object, or restored from a backup). The previous
	// version wrote none (see Legacy).
	UID types.UID `json:"uid,omitempty"`
}

// Legacy reports whether the record names no UID: written by a version of nodemaint before
// records named their object, for a surge in flight at the upgrade.
func (s *State) Legacy() bool { return s.UID == "" }

func (s *State) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Parse reads the surge in progress from the Deployment, nil when there is none. A record that
// names another object's UID, or that nodemaint would never write (a surge of nothing, from no
// replicas), is an error: it is not nodemaint's.
func Parse(d *appsv1.Deployment) (*State, error) {
	v, ok := d.Annotations[evacuation.SurgeAnnotation]
	if !ok {
		return nil, nil
	}
	s := &State{}
	if err := json.Unmarshal([]byte(v), s); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", evacuation.SurgeAnnotation, err)
	}
	if !s.valid() {
		return nil, fmt.Errorf("annotation %s: invalid value %q", evacuation.SurgeAnnotation, v)
	}
	if !s.Legacy() && s.UID != d.UID {
		return nil, fmt.Errorf("annotation %s names UID %s, not the Deployment's (%s): not nodemaint's record", evacuation.SurgeAnnotation, s.UID, d.UID)
	}
	return s, nil
}

// valid: nodemaint surges a Deployment of at least one replica (one of none has nothing to
// move), by at least one.
func (s *State) valid() bool {
	return s.OriginalReplicas >= 1 && s.Surge > 0 && !s.StartTime.IsZero()
}

// Equal reports whether two surge states (nil for none) are the same surge, their start times
// to the microsecond the records keep.
func (s *State) Equal(o *State) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.OriginalReplicas == o.OriginalReplicas && s.Surge == o.Surge &&
		s.StartTime.Truncate(time.Microsecond).Equal(o.StartTime.Truncate(time.Microsecond))
}

// Bounds is the value of evacuation.SurgeBoundsAnnotation on a HorizontalPodAutoscaler: the
// bounds the responder raised for a surge of the Deployment it names, and what they were. A
// HorizontalPodAutoscaler undoes a raised spec.replicas: above maxReplicas it scales down at
// once, and with metrics it recomputes the count; so while a surge is in progress its
// minReplicas (and maxReplicas, where below) are at least the surged count.
type Bounds struct {
	// UID is the UID of the autoscaler the record is written on: a record naming another is not
	// nodemaint's. The previous version wrote none (see Legacy).
	UID types.UID `json:"uid,omitempty"`
	// Deployment names the Deployment of the surge, in the autoscaler's namespace.
	Deployment string `json:"deployment"`
	// MinReplicas and MaxReplicas are the autoscaler's bounds before the surge, restored after it.
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	MaxReplicas int32  `json:"maxReplicas"`
	// SetMinReplicas and SetMaxReplicas are the values the responder set, nil where it did not
	// change the bound: a bound is restored only while it still holds the value set (someone
	// else's later change wins).
	SetMinReplicas *int32 `json:"setMinReplicas,omitempty"`
	SetMaxReplicas *int32 `json:"setMaxReplicas,omitempty"`
	// Surge is the surge the bounds are raised for, as the Deployment's surge record says it
	// once the responder scaled it (its UID the Deployment's). The autoscaler may scale the Deployment to the raised
	// minReplicas first: the responder's own scale then finds the count changed, and the
	// record tells it the count is its surge's (the responder adopts it).
	Surge *State `json:"surge,omitempty"`
	// Restored is when the bounds were restored after the surge, the record kept until the
	// autoscaler has acted on them: a decision it took from the raised bounds, before it saw them
	// restored, can scale the Deployment to the surged count after the responder scaled it back.
	// Nil while the bounds are raised.
	Restored *metav1.MicroTime `json:"restored,omitempty"`
}

// Legacy reports whether the record names no UID: written by a version of nodemaint before
// records named their object. Such a record only has the autoscaler's own bounds restored: no
// count of the Deployment is taken from it.
func (b *Bounds) Legacy() bool { return b.UID == "" }

// Names reports whether the record is nodemaint's own of the autoscaler's surge of the
// Deployment: it names the autoscaler's UID and a surge that names the Deployment's. Only such
// a record has the responder change the Deployment's count (adopt or undo a surge).
func (b *Bounds) Names(hpa *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment) bool {
	return !b.Legacy() && b.UID == hpa.UID && b.Deployment == d.Name && b.Surge != nil && !b.Surge.Legacy() && b.Surge.UID == d.UID
}

// Surged is the surged count the bounds were raised for, 0 when the record does not name the
// surge.
func (b *Bounds) Surged() int32 {
	if b.Surge == nil {
		return 0
	}
	return b.Surge.OriginalReplicas + b.Surge.Surge
}

func (b *Bounds) String() string {
	v, _ := json.Marshal(b)
	return string(v)
}

// ParseBounds reads the responder's record of raised bounds from the autoscaler, nil when there
// is none.
func ParseBounds(hpa *autoscalingv2.HorizontalPodAutoscaler) (*Bounds, error) {
	v, ok := hpa.Annotations[evacuation.SurgeBoundsAnnotation]
	if !ok {
		return nil, nil
	}
	b := &Bounds{}
	if err := json.Unmarshal([]byte(v), b); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", evacuation.SurgeBoundsAnnotation, err)
	}
	if b.Deployment == "" || b.MaxReplicas < 1 || (b.SetMinReplicas == nil && b.SetMaxReplicas == nil) || (b.Surge != nil && !b.Surge.valid()) ||
		ptr.Deref(b.MinReplicas, 1) < 1 || ptr.Deref(b.SetMinReplicas, 1) < 1 || ptr.Deref(b.SetMaxReplicas, 1) < 1 {
		return nil, fmt.Errorf("annotation %s: invalid value %q", evacuation.SurgeBoundsAnnotation, v)
	}
	if !b.Legacy() && b.UID != hpa.UID {
		return nil, fmt.Errorf("annotation %s names UID %s, not the HorizontalPodAutoscaler's (%s): not nodemaint's record", evacuation.SurgeBoundsAnnotation, b.UID, hpa.UID)
	}
	return b, nil
}

// OwnMinReplicas is the autoscaler's minReplicas as its owner set it: its minReplicas, or, while
// the record of raised bounds naming the Deployment says the responder set the minReplicas it
// holds, the one the record says it had before. The responder never scales the Deployment below
// it.
func OwnMinReplicas(hpa *autoscalingv2.HorizontalPodAutoscaler, deployment string) int32 {
	cur := MinReplicas(hpa)
	rec, err := ParseBounds(hpa)
	if err != nil || rec == nil || rec.Deployment != deployment || rec.Restored != nil || rec.SetMinReplicas == nil || *rec.SetMinReplicas != cur {
		return cur
	}
	return ptr.Deref(rec.MinReplicas, 1)
}

// RevertLimit is how many of a Deployment's surges in one evacuation may be set back (spec.replicas
// returned to the count before the surge, as a GitOps engine's self-heal does) before the
// responder declines its pods: the first may be someone's scale, the second shows a pattern.
const RevertLimit = 2

// Reverted is the value of evacuation.SurgeRevertedAnnotation: how many surges of the
// Deployment's current evacuation were set back, and to which count.
type Reverted struct {
	// UID is the UID of the Deployment the record is written on.
	UID types.UID `json:"uid"`
	// Count is how many surges were set back.
	Count int32 `json:"count"`
	// Replicas is the count the last one was set back to.
	Replicas int32 `json:"replicas"`
}

func (r *Reverted) String() string {
	v, _ := json.Marshal(r)
	return string(v)
}

// ParseReverted reads the count of the Deployment's surges set back, nil when there is none. One
// that names another object's UID, or none, is not nodemaint's: an error.
func ParseReverted(d *appsv1.Deployment) (*Reverted, error) {
	v, ok := d.Annotations[evacuation.SurgeRevertedAnnotation]
	if !ok {
		return nil, nil
	}
	r := &Reverted{}
	if err := json.Unmarshal([]byte(v), r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", evacuation.SurgeRevertedAnnotation, err)
	}
	if r.Count < 1 || r.Replicas < 0 {
		return nil, fmt.Errorf("annotation %s: invalid value %q", evacuation.SurgeRevertedAnnotation, v)
	}
	if r.UID != d.UID {
		return nil, fmt.Errorf("annotation %s names UID %q, not the Deployment's (%s): not nodemaint's record", evacuation.SurgeRevertedAnnotation, r.UID, d.UID)
	}
	return r, nil
}

// Eligible is el, unless the Deployment's surges were set back RevertLimit times: then its pods
// are declined (ReasonReplicasReverted), since the next surge would be set back too, and the
// drain would wait for it for good. r may be nil (none set back).
func (r *Reverted) Eligible(el Eligibility) Eligibility {
	if !el.OK || r == nil || r.Count < RevertLimit {
		return el
	}
	return Eligibility{Reason: ReasonReplicasReverted, Message: RevertedMessage(r.Replicas, r.Count)}
}

// RevertedMessage says why the responder declines the pods of a Deployment whose surges were set
// back count times, to replicas.
func RevertedMessage(replicas, count int32) string {
	return fmt.Sprintf("something reverts its replicas: spec.replicas was set back to %d during %d of the Deployment's surges "+
		"(a GitOps engine's self-heal?), so eviction moves its pods, within their PodDisruptionBudget; "+
		"let the surge through as nodemaint's user guide says (GitOps)", replicas, count)
}

// MinReplicas is the autoscaler's minReplicas, 1 when unset (the API server's default).
func MinReplicas(hpa *autoscalingv2.HorizontalPodAutoscaler) int32 {
	return ptr.Deref(hpa.Spec.MinReplicas, 1)
}
