// Command responder is a minimal evacuation responder, built on nodemaint's public package
// github.com/nodemaint/nodemaint/pkg/evacuation and controller-runtime only. See
// docs/responder-protocol.md.
//
// It answers the evacuation requests of the pods labelled example.nodemaint.dev/responder=checkpoint:
// the workers of an imaginary batch system that can save their progress and resume elsewhere.
// For each such pod asked to leave its node it
//
//   - declines when the pod is not Running (there is nothing to save: eviction may go ahead);
//   - otherwise accepts, saves the worker's progress (here an annotation stands in for a call to
//     the worker), and deletes the pod, which its owner (a Job, say) recreates on another node;
//   - withdraws its answer when the request goes away before the pod is deleted.
//
// Every step is recorded on the pod, so the responder can be restarted at any time.
//
//	go run ./examples/responder --kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// checkpointedAnnotation records that the worker's progress was saved.
	checkpointedAnnotation = "example.nodemaint.dev/checkpointed-at"
)

// checkpointer answers the evacuation requests of checkpointable workers.
type checkpointer struct {
	client client.Client
}

func (r *checkpointer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case !pod.DeletionTimestamp.IsZero():
		return reconcile.Result{}, nil

	case !evacuation.Requested(pod):
		// No request (any more): take back an answer given to a withdrawn request.
		return reconcile.Result{}, evacuation.Withdraw(ctx, r.client, pod)

	case evacuation.Declined(pod):
		return reconcile.Result{}, nil

	case pod.Status.Phase != corev1.PodRunning:
		logger.Info("Declining: nothing to save")
		return reconcile.Result{}, evacuation.Decline(ctx, r.client, pod, "NotRunning", "the worker is not running: nothing to save")

	case !evacuation.Accepted(pod):
		// Accept first, and quickly: a requester evicts pods whose owner does not answer.
		logger.Info("Accepting the evacuation")
		return reconcile.Result{}, evacuation.Accept(ctx, r.client, pod, "Checkpointing", "saving the worker's progress before it moves")

	case pod.Annotations[checkpointedAnnotation] == "":
		// A real responder would ask the worker to save its progress here and wait for it.
		orig := pod.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[checkpointedAnnotation] = time.Now().UTC().Format(time.RFC3339)
		return reconcile.Result{}, r.client.Patch(ctx, pod, client.MergeFrom(orig))

	default:
		// Progress saved: the pod may go. Its owner recreates it; the node is cordoned, so
		// elsewhere. The precondition makes sure this is the pod that was checkpointed.
		logger.Info("Progress saved, deleting the pod")
		err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
}

func main() {
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	logger := ctrl.Log.WithName("responder")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		logger.Error(err, "Creating the manager")
		os.Exit(1)
	}
	selected, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{responderLabel: "checkpoint"}})
	if err != nil {
		logger.Error(err, "Building the pod predicate")
		os.Exit(1)
	}
	err = builder.ControllerManagedBy(mgr).
		Named("checkpointer").
		For(&corev1.Pod{}, builder.WithPredicates(selected)).
		Complete(&checkpointer{client: mgr.GetClient()})
	if err != nil {
		logger.Error(err, "Creating the controller")
		os.Exit(1)
	}
	logger.Info("Answering evacuation requests", "label", responderLabel+"=checkpoint")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		logger.Error(err, "Running the manager")
		os.Exit(1)
	}
}
