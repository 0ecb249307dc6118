// Package permissions tells nodemaint-controller what the API server lets it do where the
// install leaves the choice to the admin: today, deleting pods, which only drainTimeoutAction:
// Delete needs and which the default install does not grant (Helm: podDeletion.enabled;
// kustomize: the component config/pod-deletion).
package permissions

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultInterval is how often PodDeletion asks again without a reason to.
const DefaultInterval = time.Minute

// state of a PodDeletion.
const (
	unknown int32 = iota
	allowed
	denied
)

// PodDeletion knows whether the controller may delete pods in every namespace. It asks the API
// server with a SelfSubjectAccessReview (which every authenticated user may create) when
// started, every Interval after, and at once after a deletion was forbidden, so that granting
// or revoking the permission (installing or removing the opt-in ClusterRole) shows within an
// Interval, without a restart. Until the first answer it says allowed, as before the question
// was asked: a deletion then forbidden is reported and asks again.
//
// A nil *PodDeletion says allowed: the integration tests' controllers run as cluster admin.
type PodDeletion struct {
	// Client creates the SelfSubjectAccessReviews.
	Client client.Client
	// Interval between two reviews; zero: DefaultInterval.
	Interval time.Duration

	state   atomic.Int32
	recheck chan struct{}
	once    sync.Once
	mu      sync.Mutex
	subs    []chan event.GenericEvent
}

func (p *PodDeletion) init() {
	p.once.Do(func() { p.recheck = make(chan struct{}, 1) })
}

// Denied reports whether the last answer was that the controller may not delete pods.
func (p *PodDeletion) Denied() bool {
	return p != nil && p.state.Load() == denied
}

// Forbidden says a pod deletion was forbidden (403): the answer is asked again at once.
func (p *PodDeletion) Forbidden() {
	if p == nil {
		return
	}
	p.init()
	select {
	case p.recheck <- struct{}{}:
	default:
	}
}

// Changes returns a channel that gets an event each time the answer changes (for a
// controller's source.Channel: its handler maps it to what to look at again). Call it before
// Start.
func (p *PodDeletion) Changes() <-chan event.GenericEvent {
	ch := make(chan event.GenericEvent, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs = append(p.subs, ch)
	return ch
}

// Check asks the API server once and keeps the answer.
func (p *PodDeletion) Check(ctx context.Context) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods"},
	}}
	if err := p.Client.Create(ctx, review); err != nil {
		return fmt.Errorf("asking whether the controller may delete pods: %w", err)
	}
	want := denied
	if review.Status.Allowed {
		want = allowed
	}
	if old := p.state.Swap(want); old != want {
		log.FromContext(ctx).Info("Pod deletion permission", "allowed", review.Status.Allowed,
			"note", "drainTimeoutAction Delete needs it: Helm podDeletion.enabled, kustomize component config/pod-deletion")
		p.notify()
	}
	return nil
}

func (p *PodDeletion) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.subs {
		select {
		case ch <- event.GenericEvent{Object: &corev1.Pod{}}:
		default: // one pending event is enough: the handler looks at everything again
		}
	}
}

// Start asks every Interval and after each Forbidden until ctx ends (manager.Runnable). A failed
// review keeps the last answer and is tried again at the next Interval.
func (p *PodDeletion) Start(ctx context.Context) error {
	p.init()
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := p.Check(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "SelfSubjectAccessReview failed; keeping the last answer")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-p.recheck:
		}
	}
}

// NeedLeaderElection is false: a standby replica knows the answer when it takes over.
func (p *PodDeletion) NeedLeaderElection() bool { return false }
