package drain

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// Evictions remembers, per pod, evictions the API server refused (429: a PodDisruptionBudget), so
// that they back off exponentially per pod without holding up other pods, and the refusal shows in
// the status. It is memory only: after a restart the first attempt finds the refusal again.
type Evictions struct {
	limiter workqueue.TypedRateLimiter[types.UID]

	mu      sync.Mutex
	refused map[types.UID]Refusal
}

// Refusal is an eviction the API server refused: the pod backs off until NotBefore. Reason is
// nodemaintv1alpha1.BlockedReasonPodDisruptionBudget for a 429, BlockedReasonEvictionFailed
// otherwise; Message is the API server's. Budgets identifies the state of the
// PodDisruptionBudgets the eviction was refused under, where the evictor records it (RefusedUnder),
// so that it can try again as soon as they change.
type Refusal struct {
	NotBefore       time.Time
	Reason, Message string
	Budgets         string
}

// NewEvictions returns an Evictions backing off from initial up to max.
func NewEvictions(initial, max time.Duration) *Evictions {
	return &Evictions{
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](initial, max),
		refused: map[types.UID]Refusal{},
	}
}

// Wait reports how long the pod's eviction must still back off; 0 when it may be tried now.
func (e *Evictions) Wait(uid types.UID, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(e.refused[uid].NotBefore.Sub(now), 0)
}

// Refused records a refused eviction, with the reason (nodemaintv1alpha1.BlockedReasonPodDisruptionBudget for a 429,
// nodemaintv1alpha1.BlockedReasonEvictionFailed otherwise) and the API server's message, and returns the back-off.
func (e *Evictions) Refused(uid types.UID, now time.Time, reason, message string) time.Duration {
	return e.RefusedUnder(uid, now, reason, message, "")
}

// RefusedUnder is Refused, recording the state of the budgets the eviction was refused under.
func (e *Evictions) RefusedUnder(uid types.UID, now time.Time, reason, message, budgets string) time.Duration {
	d := e.limiter.When(uid)
	e.mu.Lock()
	e.refused[uid] = Refusal{NotBefore: now.Add(d), Reason: reason, Message: message, Budgets: budgets}
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
	return r.Reason, r.Message, ok
}

// Refusals returns the refusals of these pods' last evictions, by UID; nil when there are none.
func (e *Evictions) Refusals(pods []Classified) map[types.UID]Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out map[types.UID]Refusal
	for _, c := range pods {
		if r, ok := e.refused[c.Pod.UID]; ok {
			if out == nil {
				out = map[types.UID]Refusal{}
			}
			out[c.Pod.UID] = r
		}
	}
	return out
}
