// Command responder is a minimal evacuation responder, built on nodemaint's public package
// github.com/nodemaint/nodemaint/pkg/evacuation and controller-runtime only. It answers both
// protocols through one evacuation.PodRequest: KEP-4212's pod conditions (EvacuationRequest) and,
// where the cluster serves it, KEP-4563's EvictionRequest API (the pod's Eviction, on which it is
// the Active responder). See docs/responder-protocol.md.
//
// It answers for the pods labelled example.nodemaint.dev/responder=checkpoint: the workers of an
// imaginary batch system that can save their progress and resume elsewhere. For each such pod
// asked to leave its node it
//
//   - declines when the pod is not Running (there is nothing to save: eviction may go ahead);
//   - otherwise accepts, saves the worker's progress (here an annotation stands in for a call to
//     the worker), and then
//   - on pod conditions, deletes the pod, which its owner recreates on another node;
//   - on an Eviction, completes its turn without deleting the pod: a partial responder, it hands
//     the eviction to the next responder of the pod (its owner's, such as nodemaint's Deployment
//     responder, which surges a replacement first; in the end the imperative evictor);
//   - on pod conditions, withdraws its answer when the request goes away before the pod is
//     deleted (on an Eviction, the Eviction controller cancels its turn).
//
// To answer Evictions, the pods name it in spec.evictionResponders, above their owner's
// responder (the Deployment responder registers with priority 10000):
//
//	evictionResponders:
//	- name: example.nodemaint.dev/checkpoint
//	  priority: 20000
//
// Every step is recorded on the pod or the Eviction, so the responder can be restarted at any time.
//
//	go run ./examples/responder --kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"

	"os"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

const (
	// responderLabel selects the pods this responder answers for.
	responderLabel = "example.nodemaint.dev/responder"
	// responderName is its name in the pods' spec.evictionResponders and the Evictions.
	responderName = "example.nodemaint.dev/checkpoint"
	// checkpointedAnnotation records that the worker's progress was saved.
	checkpointedAnnotation = "example.nodemaint.dev/checkpointed-at"
)

// checkpointer answers the evacuation requests of checkpointable workers.
type checkpointer struct {
	client client.Client
	// evictions: the cluster serves lifecycle.k8s.io/v1alpha1.
	evictions bool
}

func (r *checkpointer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pod.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	request, err := r.request(ctx, pod)
	if err != nil || request == nil {
		// No request (any more): take back an answer given to a withdrawn pod-condition request.
		return reconcile.Result{}, cmpErr(err, evacuation.Withdraw(ctx, r.client, pod))
	}
	logger = logger.WithValues("protocol", request.Protocol(), "requesters", request.Requesters())
	switch {
	case request.Protocol() == evacuation.PodConditions && evacuation.Declined(pod):
		return reconcile.Result{}, nil

	case pod.Status.Phase != corev1.PodRunning:
		logger.Info("Declining: nothing to save")
		return reconcile.Result{}, request.Decline(ctx, r.client, "NotRunning", "the worker is not running: nothing to save")

	case !request.Accepted():
		// Accept first, and quickly: a requester evicts pods whose owner does not answer.
		logger.Info("Accepting the evacuation")
		return reconcile.Result{}, request.Accept(ctx, r.client, evacuation.Progress{
			Reason: "Checkpointing", Message: "saving the worker's progress before it moves",
			ExpectedCompletion: time.Now().Add(time.Minute),
		})

	case pod.Annotations[checkpointedAnnotation] == "":
		// A real responder would ask the worker to save its progress here, and report progress
		// (request.Progress) at least every request.HeartbeatDue() while it waits.
		orig := pod.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[checkpointedAnnotation] = time.Now().UTC().Format(time.RFC3339)
		return reconcile.Result{}, r.client.Patch(ctx, pod, client.MergeFrom(orig))

	case request.Protocol() == evacuation.EvictionRequests:
		// Progress saved: hand the eviction to the pod's next responder.
		logger.Info("Progress saved, completing the turn")
		return reconcile.Result{}, request.Complete(ctx, r.client, "the worker's progress is saved; the next responder moves the pod")

	default:
		// Progress saved: the pod may go. Its owner recreates it; the node is cordoned, so
		// elsewhere. The precondition makes sure this is the pod that was checkpointed.
		logger.Info("Progress saved, deleting the pod")
		err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
}

// request is the pod's request to answer: its Eviction when this responder is Active on one,
// else its EvacuationRequest condition; nil when none asks.
func (r *checkpointer) request(ctx context.Context, pod *corev1.Pod) (evacuation.PodRequest, error) {
	var evictions []*lifecyclev1alpha1.Eviction
	if r.evictions {
		var list lifecyclev1alpha1.EvictionList
		if err := r.client.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			evictions = append(evictions, &list.Items[i])
		}
	}
	return evacuation.For(pod, evictions, responderName), nil
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func main() {
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	logger := ctrl.Log.WithName("responder")
	if err := run(logger); err != nil {
		logger.Error(err, "Running the responder")
		os.Exit(1)
	}
}

func run(logger logr.Logger) error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	selected, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{responderLabel: "checkpoint"}})
	if err != nil {
		return err
	}
	// Evictions where the API server serves them (discovery).
	r := &checkpointer{client: mgr.GetClient()}
	gvk := lifecyclev1alpha1.SchemeGroupVersion.WithKind("Eviction")
	switch _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); {
	case err == nil:
		r.evictions = true
	case !meta.IsNoMatchError(err):
		return err
	}
	b := builder.ControllerManagedBy(mgr).Named("checkpointer").For(&corev1.Pod{}, builder.WithPredicates(selected))
	if r.evictions {
		// An Eviction's change is a change of its target pod's request.
		b = b.Watches(&lifecyclev1alpha1.Eviction{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				ev := o.(*lifecyclev1alpha1.Eviction)
				if ev.Spec.Target.Pod == nil || evacuation.ResponderState(ev, responderName) == "" {
					return nil
				}
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ev.Namespace, Name: ev.Spec.Target.Pod.Name}}}
			}))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	logger.Info("Answering evacuation requests", "label", responderLabel+"=checkpoint", "evictions", r.evictions, "responder", responderName)
	return mgr.Start(ctrl.SetupSignalHandler())
}
