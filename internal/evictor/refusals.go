package evictor

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodemaint/nodemaint/internal/drain"
)

// Refusals remembers, per pod, the evictions the API server refused (429: a PodDisruptionBudget)
// or failed, so that they back off exponentially per pod without holding up other pods, and the
// refusal shows in the status. It is memory only: after a restart the first attempt finds the
// refusal again.
type Refusals struct {
	limiter workqueue.TypedRateLimiter[types.UID]

	mu      sync.Mutex
	refused map[types.UID]drain.Refusal
}

// NewRefusals returns a Refusals backing off from initial up to max.
func NewRefusals(initial, max time.Duration) *Refusals {
	return &Refusals{
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](initial, max),
		refused: map[types.UID]drain.Refusal{},
	}
}

// Wait reports how long the pod's eviction must still back off; 0 when it may be tried now.
func (e *Refusals) Wait(uid types.UID, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(e.refused[uid].NotBefore.Sub(now), 0)
}

// Refused records a refused eviction, with the reason (nodemaintv1alpha1.BlockedReasonPodDisruptionBudget for a 429,
// nodemaintv1alpha1.BlockedReasonEvictionFailed otherwise) and the API server's message, and returns the back-off.
func (e *Refusals) Refused(uid types.UID, now time.Time, reason, message string) time.Duration {
	return e.RefusedUnder(uid, now, reason, message, "")
}

// RefusedUnder is Refused, recording the state of the budgets the eviction was refused under.
func (e *Refusals) RefusedUnder(uid types.UID, now time.Time, reason, message, budgets string) time.Duration {
	d := e.limiter.When(uid)
	e.mu.Lock()
	e.refused[uid] = drain.Refusal{NotBefore: now.Add(d), Reason: reason, Message: message, Budgets: budgets, Attempts: e.limiter.NumRequeues(uid)}
	e.mu.Unlock()
	return d
}

// Done forgets the pod: evicted or gone.
func (e *Refusals) Done(uid types.UID) {
	e.limiter.Forget(uid)
	e.mu.Lock()
	delete(e.refused, uid)
	e.mu.Unlock()
}

// None reports whether no pod's eviction is remembered as refused (true for a nil Refusals).
func (e *Refusals) None() bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.refused) == 0
}

// Refusal returns the reason and message of the pod's last refused eviction.
func (e *Refusals) Refusal(uid types.UID) (reason, message string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.refused[uid]
	return r.Reason, r.Message, ok
}

// Of returns the refusals of these pods' last evictions, by UID; nil when there are none.
func (e *Refusals) Of(pods []drain.Classified) map[types.UID]drain.Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out map[types.UID]drain.Refusal
	for _, c := range pods {
		if r, ok := e.refused[c.Pod.UID]; ok {
			if out == nil {
				out = map[types.UID]drain.Refusal{}
			}
			out[c.Pod.UID] = r
		}
	}
	return out
}
