package deployment

// The responder on KEP-4563's Evictions: which Evictions it reads, what progress it reports on
// them, and the watch that brings their changes. The translation between the protocols is
// internal/responder's; the surge is internal/controller/deployment/deploymentdecide's, the same for
// both protocols.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/responder"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// EvictionResponder is the name nodemaint's Deployment responder registers under in the pods'
// spec.evictionResponders (the MutatingAdmissionPolicy in config/admission/eviction-responder
// sets it on the pods of Deployments at creation) and answers as in their Evictions.
const EvictionResponder = "nodemaint.dev/deployment-responder"

// evictionTargetIndex indexes Evictions by the UID of their target pod.
const evictionTargetIndex = "nodemaint.dev/eviction-target-pod-uid"

// evictionsOf reads the Evictions of the pods from the cache, by pod UID; none without an
// EvictionResponder. Not copied: read only (a write copies the Eviction it patches); deep copies
// of every pod's Eviction at each look at its Deployment were 6% of the controller's CPU late in
// scenario L through EvictionRequests.
func (r *Reconciler) evictionsOf(ctx context.Context, pods []*corev1.Pod) (map[types.UID][]*lifecyclev1alpha1.Eviction, error) {
	if r.EvictionResponder == "" {
		return nil, nil
	}
	out := map[types.UID][]*lifecyclev1alpha1.Eviction{}
	for _, pod := range pods {
		var list lifecyclev1alpha1.EvictionList
		if err := r.Client.List(ctx, &list, client.InNamespace(pod.Namespace), client.MatchingFields{evictionTargetIndex: string(pod.UID)}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the Evictions of pod %s: %w", pod.Name, err)
		}
		for i := range list.Items {
			out[pod.UID] = append(out[pod.UID], r.evictionWrites.Fresh(&list.Items[i]))
		}
	}
	return out, nil
}

// evictionClient is the responder's client whose writes of an Eviction's status are
// remembered until the cache shows them, so that the next look starts from what it wrote
// (evictionsOf). The writes of a wave's pods come back from the watch one by one, each an event
// that brings a look at the Deployment, and a look that read the others' Evictions before their
// writes showed would write them again.
func (r *Reconciler) evictionClient() client.Client {
	return evictionWriter{Client: r.Client, writes: r.evictionWrites}
}

type evictionWriter struct {
	client.Client
	writes *ownwrites.Writes[*lifecyclev1alpha1.Eviction]
}

func (c evictionWriter) Status() client.SubResourceWriter {
	return evictionStatusWriter{SubResourceWriter: c.Client.Status(), writes: c.writes}
}

type evictionStatusWriter struct {
	client.SubResourceWriter
	writes *ownwrites.Writes[*lifecyclev1alpha1.Eviction]
}

// Patch patches the status and, for an Eviction, remembers what the API server returned.
func (w evictionStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	before := obj.GetResourceVersion()
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if ev, ok := obj.(*lifecyclev1alpha1.Eviction); ok && err == nil {
		w.writes.Wrote(before, ev.DeepCopy())
	}
	return err
}

// heartbeats writes the heartbeats due on the Evictions the responder accepted, at KEP-4563's
// cadence (evacuation.HeartbeatInterval), each with the progress of the pod's move then, until
// the pod is gone. It returns when the next heartbeat is due. A write that fails is logged and
// done again at the next look: the Eviction controller waits 20 minutes for a heartbeat. The
// writes go in parallel, as the answers do.
func (r *Reconciler) heartbeats(ctx context.Context, in deploymentdecide.Input, view responder.View) time.Time {
	beats, next := view.Heartbeats(in.Pods, in.Now)
	wave := deploymentdecide.SurgeWave(in)
	var surging evacuation.Progress // the same for every pod of the wave
	if len(wave) > 0 {
		surging = deploymentdecide.SurgeProgress(in)
	}
	var g errgroup.Group
	g.SetLimit(podWritesInFlight)
	for _, b := range beats {
		pod := b.Request.Pod()
		// The pod's state at its heartbeat: being removed, its wave surging for it, or else
		// waiting for its wave (or for its next one), as its acceptance said.
		var p evacuation.Progress
		switch {
		case b.Terminating:
			if gone := deploymentdecide.Removing(in.Deployment.Name, pod); !b.Request.Reported(gone) {
				p = gone
			}
		case wave[pod.UID]:
			p = surging
		default:
			p = deploymentdecide.Accepting(in.Deployment.Name)
		}
		g.Go(func() error {
			err := b.Request.Progress(ctx, r.evictionClient(), p)
			switch {
			case err == nil || apierrors.IsNotFound(err):
			case apierrors.IsInvalid(err):
				// The API server refuses writes to the entry of a responder that is no longer
				// Active: the Eviction moved on (canceled, passed over) after the cache was
				// read. Its event brings the next look.
				log.FromContext(ctx).V(1).Info("The Eviction moved on before the report", "pod", pod.Name, "err", err.Error())
			default:
				log.FromContext(ctx).Error(err, "Reporting on the pod's Eviction", "pod", pod.Name)
			}
			return nil
		})
	}
	_ = g.Wait()
	return next
}

// evictionTarget is the index function of evictionTargetIndex.
func evictionTarget(o client.Object) []string {
	if t := o.(*lifecyclev1alpha1.Eviction).Spec.Target.Pod; t != nil {
		return []string{string(t.UID)}
	}
	return nil
}

// podOfEviction maps an Eviction to the Deployment of its target pod.
func podOfEviction(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		ev := o.(*lifecyclev1alpha1.Eviction)
		if ev.Spec.Target.Pod == nil {
			return nil
		}
		pod := &corev1.Pod{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ev.Namespace, Name: ev.Spec.Target.Pod.Name}, pod); err != nil {
			return nil
		}
		return deploymentOfPod(ctx, c, pod, false)
	}
}

// evictionChanged passes the events of Evictions that list the responder, when its state, its
// status entry, the conditions or the Eviction's existence change.
func evictionChanged(responder string) predicate.Predicate {
	lists := func(ev *lifecyclev1alpha1.Eviction) bool {
		return slices.ContainsFunc(ev.Status.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool { return t.Name == responder })
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return lists(e.Object.(*lifecyclev1alpha1.Eviction)) },
		DeleteFunc: func(e event.DeleteEvent) bool { return lists(e.Object.(*lifecyclev1alpha1.Eviction)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*lifecyclev1alpha1.Eviction), e.ObjectNew.(*lifecyclev1alpha1.Eviction)
			if !lists(o) && !lists(n) {
				return false
			}
			return evacuation.ResponderState(o, responder) != evacuation.ResponderState(n, responder) ||
				!equality.Semantic.DeepEqual(evacuation.ResponderStatusOf(o, responder), evacuation.ResponderStatusOf(n, responder)) ||
				!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions) ||
				!o.DeletionTimestamp.Equal(n.DeletionTimestamp)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// ServesEvictions reports whether the API server serves KEP-4563's Evictions
// (lifecycle.k8s.io/v1alpha1, feature gate EvictionRequestAPI), from discovery: where it does,
// the responder answers them as EvictionResponder, besides the pod conditions.
func ServesEvictions(mapper meta.RESTMapper) (bool, error) {
	gvk := lifecyclev1alpha1.SchemeGroupVersion.WithKind("Eviction")
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("discovering %s: %w", gvk.GroupVersion(), err)
}
