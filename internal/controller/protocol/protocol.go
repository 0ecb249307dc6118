// Package protocol holds how nodemaint asks the owners of pods to move them (EvacuationProtocol),
// as one value (Protocol): nodemaint's pod conditions, and KEP-4563's EvictionRequests where its
// EvictionRequest part is set. The protocol is a way to write the node's decision (nodedecide.Decide), never a decision of its own: it reads its objects into the
// pods as their owners answered, and turns the decision's Request and Withdraw into its writes,
// which the node controller carries out.
package protocol

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions,verbs=get;list;watch

// Protocol is how nodemaint asks the owners of pods to move them: nodemaint's EvacuationRequest
// pod condition, answered on the pod (EvacuationInitiated), and, where EvictionRequests is set,
// KEP-4563's EvictionRequests too, answered on each pod's Eviction. The EvictionRequest protocol
// is a superset: it still asks through the pod condition the pods an EvictionRequest would not
// reach (see EvictionRequests). The zero value is the pod condition protocol.
type Protocol struct {
	// EvictionRequests is the protocol's EvictionRequest part; nil under pod conditions.
	EvictionRequests *EvictionRequests
}

// Writes are a node decision's Request and Withdraw as one protocol writes them. The node
// controller writes them all, in this order, whatever the protocol.
type Writes struct {
	// Before the node is written: the pods whose pod condition is withdrawn, and the
	// EvictionRequests withdrawn, deleted or adopted.
	Withdraw         []*corev1.Pod
	WithdrawRequests requester.Writes
	// Once the node is cordoned: the pods that get the pod condition with reason, and the
	// EvictionRequests created or asking again.
	Request         []*corev1.Pod
	Reason          string
	RequestRequests requester.Writes
}

// livePod is the pod key names as the API server has it, if it is the pod of that uid; nil when
// it is gone or replaced by a namesake.
func livePod(ctx context.Context, r client.Reader, key types.NamespacedName, uid types.UID) (*corev1.Pod, error) {
	live := &corev1.Pod{}
	switch err := r.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case live.UID != uid:
		return nil, nil
	}
	return live, nil
}

// For is the protocol p names, its EvictionRequest part reading its objects from s (a node's) and
// c (a gone node's); the zero value of p is PodConditions.
func For(p nodemaintv1alpha1.EvacuationProtocol, c client.Reader, s Stores) Protocol {
	if p == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		return Protocol{EvictionRequests: &EvictionRequests{client: c, stores: s}}
	}
	return Protocol{}
}

// Observe reads the protocol's objects of the node and returns the pods as their owners
// answered, and what its EvictionRequest part read (nil under pod conditions, where the pods
// carry their answers themselves).
func (p Protocol) Observe(_ context.Context, node string, pods []*corev1.Pod) ([]*corev1.Pod, *requester.Observed, error) {
	if p.EvictionRequests == nil {
		return pods, nil, nil
	}
	return p.EvictionRequests.observe(node, pods)
}

// Writes turns the decision into the protocol's writes, purely, from what Observe read (seen).
// Under pod conditions, the decision's Request and Withdraw as they are.
func (p Protocol) Writes(seen *requester.Observed, pods []*corev1.Pod, d nodedecide.Decision, now time.Time) Writes {
	if p.EvictionRequests == nil {
		return Writes{Withdraw: d.Withdraw, Request: d.Request, Reason: d.RequestReason}
	}
	return p.EvictionRequests.writes(seen, pods, d, now)
}

// Live reads the pod and what answers for it from the API server (r), not the cache, and
// returns it as its owners have answered it by now, as Observe would; nil when the pod is gone
// or replaced by a namesake. seen is what Observe read. The node controller reads each pod so
// right before it evicts it (drain.Overtaken): the decision was taken from the cache, which lags
// the API server by seconds on a busy cluster (and by minutes on an overloaded one, where the API
// server drops slow watchers), and an answer it has not shown yet would otherwise be overtaken by
// the eviction it answers. Only pods nobody answered in time are evicted, so the reads are few.
// Under pod conditions the pod carries its owners' answers itself.
func (p Protocol) Live(ctx context.Context, r client.Reader, pod *corev1.Pod, seen *requester.Observed) (*corev1.Pod, error) {
	if p.EvictionRequests == nil {
		return livePod(ctx, r, client.ObjectKeyFromObject(pod), pod.UID)
	}
	return p.EvictionRequests.live(ctx, r, pod, seen)
}

// EvictionRequests asks with KEP-4563's EvictionRequests the pods that name a responder of their
// own (requester.Registered) and that some maintenance would evict (not
// nodedecide.Decision.SignalOnly), and reads each one's Eviction as its owners' answer
// (requester.Answer); nodemaint's pod conditions left on them from before are withdrawn.
// The other pods are asked through the pod condition protocol, which their owners (nodemaint's
// Deployment responder among them) answer: those whose EvictionRequest would reach nobody but the
// imperative evictor (created before their owner's responder was registered, or before nodemaint
// was installed), and those nothing would evict, since an EvictionRequest asks for an eviction
// that any Eviction controller carries out, with no response timeout or grace period of the
// maintenances' (only nodemaint's own holds such a pod back, and another may run in its place).
// One decision, each pod written in the protocol that reaches its owner without more than the
// maintenances ask.
type EvictionRequests struct {
	client client.Reader
	stores Stores
}

// observe reads nodemaint's EvictionRequests of the node and the Evictions of its pods, and
// returns the pods as answered by them.
func (p *EvictionRequests) observe(node string, pods []*corev1.Pod) ([]*corev1.Pod, *requester.Observed, error) {
	seen := &requester.Observed{Node: node, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{},
		PodConditions: requester.WithPodCondition(pods)}
	var err error
	if seen.Requests, err = p.requests(node); err != nil {
		return nil, nil, err
	}
	// The Evictions of the requests' pods, looked up by pod: those are the ones the drain reads
	// (requester.Answer and Decide read a pod's Eviction only where nodemaint asks for it).
	for i := range seen.Requests {
		if t := seen.Requests[i].Spec.Target.Pod; t != nil {
			if err := p.readEvictions(t.UID, seen); err != nil {
				return nil, nil, err
			}
		}
	}
	return requester.Answer(pods, *seen), seen, nil
}

// ObserveGone reads nodemaint's EvictionRequests of a node that is gone (deleted under
// maintenance, an autoscaler's scale-down), the pods they name that still exist and their
// Evictions. Nil when there are none.
func (p *EvictionRequests) ObserveGone(ctx context.Context, node string) (*requester.Observed, []*corev1.Pod, error) {
	reqs, err := p.requests(node)
	if err != nil || len(reqs) == 0 {
		return nil, nil, err
	}
	seen := &requester.Observed{Node: node, Requests: reqs, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{}}
	var pods []*corev1.Pod
	for _, req := range reqs {
		target := req.Spec.Target.Pod
		if target == nil {
			continue
		}
		pod, err := livePod(ctx, p.client, types.NamespacedName{Namespace: req.Namespace, Name: target.Name}, target.UID)
		if err != nil {
			return nil, nil, err
		}
		if pod == nil {
			continue
		}
		pods = append(pods, pod)
		if err := p.readEvictions(pod.UID, seen); err != nil {
			return nil, nil, err
		}
	}
	return seen, pods, nil
}

// requests are nodemaint's EvictionRequests of the node (NodeLabel), from the informer's store:
// shallow copies that share their maps and slices with the cache's, read only
// (requester.WritesOf deep-copies a request before it changes it).
func (p *EvictionRequests) requests(node string) ([]lifecyclev1alpha1.EvictionRequest, error) {
	objs, err := p.stores.Requests.ByIndex(requestNodeIndex, node)
	if err != nil {
		return nil, fmt.Errorf("listing EvictionRequests: %w", err)
	}
	out := make([]lifecyclev1alpha1.EvictionRequest, 0, len(objs))
	for _, o := range objs {
		if r, ok := o.(*lifecyclev1alpha1.EvictionRequest); ok {
			out = append(out, *r)
		}
	}
	return out, nil
}

// readEvictions adds the pod's Eviction, whichever Eviction controller created it: the current
// one when there are several (requester.Current). The cache's own: read only.
func (p *EvictionRequests) readEvictions(uid types.UID, seen *requester.Observed) error {
	evs, err := p.cachedEvictions(uid)
	if err != nil {
		return err
	}
	if e := requester.Current(evs); e != nil {
		seen.Evictions[uid] = e
	}
	return nil
}

// cachedEvictions are the Evictions of the pod the cache shows, whoever created them: the
// cache's own objects, read only.
func (p *EvictionRequests) cachedEvictions(uid types.UID) ([]*lifecyclev1alpha1.Eviction, error) {
	objs, err := p.stores.Evictions.ByIndex(evictionPodIndex, string(uid))
	if err != nil {
		return nil, fmt.Errorf("listing Evictions: %w", err)
	}
	evs := make([]*lifecyclev1alpha1.Eviction, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*lifecyclev1alpha1.Eviction); ok {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// writes asks each pod of the decision's Asked in one protocol (ChannelOf): through an
// EvictionRequest, its pod condition withdrawn if it has one; or through the pod condition, a
// request of nodemaint's for it withdrawn. Withdrawn pods lose both.
func (*EvictionRequests) writes(seen *requester.Observed, pods []*corev1.Pod, d nodedecide.Decision, now time.Time) Writes {
	// The pods with a responder as read, carrying nodemaint's pod condition: pods holds their
	// answered copies, whose conditions stand for nodemaint's EvictionRequests.
	conditioned := make(map[types.UID]*corev1.Pod, len(seen.PodConditions))
	for _, pod := range seen.PodConditions {
		conditioned[pod.UID] = pod
	}
	var ask, withdraw, byCondition, withdrawnByCondition []*corev1.Pod
	for _, pod := range d.Asked {
		raw := conditioned[pod.UID]
		switch {
		case !requester.Registered(pod):
			// As decided (Request), below.
		case ChannelOf(pod, d) == EvictionRequest:
			ask = append(ask, pod)
			if raw != nil {
				withdrawnByCondition = append(withdrawnByCondition, raw)
			}
		default:
			withdraw = append(withdraw, pod)
			if raw == nil {
				byCondition = append(byCondition, pod)
			} else if c := evacuation.Condition(raw, evacuation.Request); c.Status != corev1.ConditionTrue || c.Message != d.RequestReason {
				byCondition = append(byCondition, raw)
			}
		}
	}
	for _, pod := range d.Request {
		if !requester.Registered(pod) {
			byCondition = append(byCondition, pod)
		}
	}
	for _, pod := range d.Withdraw {
		withdraw = append(withdraw, pod)
		switch raw := conditioned[pod.UID]; {
		case !requester.Registered(pod):
			withdrawnByCondition = append(withdrawnByCondition, pod)
		case raw != nil:
			withdrawnByCondition = append(withdrawnByCondition, raw)
		}
	}
	plan := requester.WritesOf(*seen, pods, ask, withdraw, d.RequestReason, now)
	w := Writes{
		Withdraw:         withdrawnByCondition,
		WithdrawRequests: plan.Withdrawals(),
		RequestRequests:  plan.Requests(),
	}
	if len(byCondition) > 0 {
		w.Request, w.Reason = byCondition, d.RequestReason
	}
	return w
}

// A Channel is how a pod is asked to move under the EvictionRequest protocol.
type Channel int

const (
	// PodCondition: nodemaint's EvacuationRequest pod condition.
	PodCondition Channel = iota
	// EvictionRequest: an EvictionRequest of nodemaint's.
	EvictionRequest
)

// ChannelOf is how the EvictionRequest protocol asks a pod of the decision's Asked: through an
// EvictionRequest where the pod names a responder of its own (requester.Registered) and
// some maintenance would evict it (not d.SignalOnly), else through the pod condition.
func ChannelOf(pod *corev1.Pod, d nodedecide.Decision) Channel {
	if requester.Registered(pod) && !d.SignalOnly[pod.UID] {
		return EvictionRequest
	}
	return PodCondition
}

func (ch Channel) String() string {
	if ch == EvictionRequest {
		return "EvictionRequest"
	}
	return "PodCondition"
}

// live reads the pod, and the Evictions the cache knows of it (each by name: the API server
// selects Evictions by no field of their target), from the API server, and answers it with them
// and nodemaint's requests as seen (the requests are nodemaint's own writes). A pod that names no
// responder carries its answers itself. An Eviction the cache does not show at all is not looked
// for: the Eviction controller creates one within seconds of the request, and a pod nobody
// answered for the whole response timeout is evicted, as without an Eviction controller.
func (p *EvictionRequests) live(ctx context.Context, r client.Reader, pod *corev1.Pod, seen *requester.Observed) (*corev1.Pod, error) {
	live, err := livePod(ctx, r, client.ObjectKeyFromObject(pod), pod.UID)
	if err != nil || live == nil || seen == nil || !requester.Registered(live) {
		return live, err
	}
	cachedEvs, err := p.cachedEvictions(pod.UID)
	if err != nil {
		return nil, err
	}
	var evs []*lifecyclev1alpha1.Eviction
	for _, cached := range cachedEvs {
		e := &lifecyclev1alpha1.Eviction{}
		switch err := r.Get(ctx, client.ObjectKeyFromObject(cached), e); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		case e.Spec.Target.Pod == nil || e.Spec.Target.Pod.UID != pod.UID:
			continue // a namesake's
		}
		evs = append(evs, e)
	}
	fresh := requester.Observed{Node: seen.Node, Requests: seen.Requests, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{}}
	if e := requester.Current(evs); e != nil {
		fresh.Evictions[live.UID] = e
	}
	return requester.Answer([]*corev1.Pod{live}, fresh)[0], nil
}
