package drain

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Reasons a pod is still on a node, as reported in a NodeMaintenance's status.
const (
	ReasonPodDisruptionBudget = "PodDisruptionBudget"
	ReasonWaitingForOwner     = "WaitingForOwner"
	ReasonEvacuatingByOwner   = "EvacuatingByOwner"
	ReasonTerminating         = "Terminating"
	ReasonWaitCompleted       = "WaitCompleted"
	ReasonSkipped             = "Skipped"
	ReasonWaitingForOrder     = "WaitingForLowerOrder"
	ReasonEvictionFailed      = "EvictionFailed"
	ReasonEvicting            = "Evicting"
)

// Policy is how the maintenances draining a node want its pods treated.
type Policy struct {
	// Evict pods whose owners do not answer; false is signal-only.
	Evict bool
	// ResponseTimeout is how long owners have to accept an evacuation request.
	ResponseTimeout time.Duration
	// CountFrom, when later than a pod's evacuation request, is when its response timeout starts
	// instead: when this controller replica became the leader (see the controller's activeSince).
	CountFrom time.Time
}

// Decision is what to do with one pod of the current order group now.
type Decision struct {
	Evict bool
	// Reason and Message say why the pod is still there when not evicted.
	Reason, Message string
	// RecheckAfter is when the decision may change by itself (the response timeout runs out).
	RecheckAfter time.Duration
	// Since is when the pod entered the state Reason names, when known (Terminating: its
	// deletion).
	Since time.Time
}

// Decide decides about a pod of the current order group. Its owner has the response timeout,
// counted from the EvacuationRequest's last transition (or policy.CountFrom, if later), to accept (EvacuationInitiated=True); an
// owner that declines (EvacuationInitiated=False) has its pod evicted at once, and so does a pod
// nobody can answer for (unanswerable: see Unanswerable). An accepted pod is left to its owner.
func Decide(pod *corev1.Pod, now time.Time, policy Policy, unanswerable bool) Decision {
	if pod.DeletionTimestamp != nil {
		return Decision{Reason: ReasonTerminating, Message: "terminating", Since: deletionRequested(pod)}
	}
	if c := evacuation.Condition(pod, evacuation.Initiated); c != nil && c.Status == corev1.ConditionTrue {
		msg := c.Message
		if msg == "" {
			msg = "the owner accepted the evacuation and is moving the pod"
		}
		return Decision{Reason: ReasonEvacuatingByOwner, Message: msg}
	}
	req := evacuation.Condition(pod, evacuation.Request)
	if req == nil || req.Status != corev1.ConditionTrue {
		return Decision{Reason: ReasonWaitingForOwner, Message: "evacuation not requested yet", RecheckAfter: time.Second}
	}
	if !policy.Evict {
		return Decision{Reason: ReasonWaitingForOwner, Message: "signal only: waiting for the owner, never evicting"}
	}
	if evacuation.Declined(pod) {
		return Decision{Evict: true}
	}
	if unanswerable {
		return Decision{Evict: true}
	}
	from := req.LastTransitionTime.Time
	if policy.CountFrom.After(from) {
		from = policy.CountFrom
	}
	left := from.Add(policy.ResponseTimeout).Sub(now)
	if left <= 0 {
		return Decision{Evict: true}
	}
	return Decision{
		Reason:       ReasonWaitingForOwner,
		Message:      fmt.Sprintf("waiting up to %s for the owner to accept the evacuation request, then evicting", policy.ResponseTimeout),
		RecheckAfter: left,
	}
}

// Evictions remembers, per pod, evictions the API server refused (429: a PodDisruptionBudget), so
// that they back off exponentially per pod without holding up other pods, and the refusal shows in
// the status. It is memory only: after a restart the first attempt finds the refusal again.
type Evictions struct {
	limiter workqueue.TypedRateLimiter[types.UID]

	mu      sync.Mutex
	refused map[types.UID]refusal
}

type refusal struct {
	notBefore time.Time
	reason    string
	message   string
}

// NewEvictions returns an Evictions backing off from initial up to max.
func NewEvictions(initial, max time.Duration) *Evictions {
	return &Evictions{
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](initial, max),
		refused: map[types.UID]refusal{},
	}
}

// Wait reports how long the pod's eviction must still back off; 0 when it may be tried now.
func (e *Evictions) Wait(uid types.UID, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(e.refused[uid].notBefore.Sub(now), 0)
}

// Refused records a refused eviction, with the reason (ReasonPodDisruptionBudget for a 429,
// ReasonEvictionFailed otherwise) and the API server's message, and returns the back-off.
func (e *Evictions) Refused(uid types.UID, now time.Time, reason, message string) time.Duration {
	d := e.limiter.When(uid)
	e.mu.Lock()
	e.refused[uid] = refusal{notBefore: now.Add(d), reason: reason, message: message}
	e.mu.Unlock()
	return d
}

// Done forgets the pod: evicted or gone.
func (e *Evictions) Done(uid types.UID) {
	e.limiter.Forget(uid)
	e.mu.Lock()
	delete(e.refused, uid)
	e.mu.Unlock()
}

// Refusal returns the reason and message of the pod's last refused eviction.
func (e *Evictions) Refusal(uid types.UID) (reason, message string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.refused[uid]
	return r.reason, r.message, ok
}

// Unanswerable reports whether nobody can answer the pod's evacuation request, so that waiting
// for an answer is pointless: a pod without a controller (a bare pod). Every other pod waits the
// response timeout, since any operator may implement the protocol for the pods it owns, unless
// its owner declines sooner.
func Unanswerable(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return false
		}
	}
	return true
}

// deletionRequested is when a terminating pod's deletion was asked for: its deletionTimestamp is
// when its grace period runs out, deletionGracePeriodSeconds after the request.
func deletionRequested(pod *corev1.Pod) time.Time {
	t := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}
