// Package drainrule holds the DrainRule controller: it reports on each DrainRule whether the
// drain can use it (Reconciler).
package drainrule

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
)

const maxConditionMessageLen = 32768 // metav1.Condition's limit

// Reconciler reports on each DrainRule whether the drain can use it: the Valid
// condition, False with reason InvalidSelector naming the error (and a Warning Event) when a
// selector does not parse. The API server refuses such selectors; a rule stored before it did
// is reported here, and the drain holds the pods it could match (drain.Class.InvalidRule).
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=nodemaint.dev,resources=drainrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=drainrules/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler for DrainRules.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	dr := &nodemaintv1alpha1.DrainRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, dr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := *dr.Status.DeepCopy()
	status.ObservedGeneration = dr.Generation
	meta.SetStatusCondition(&status.Conditions, drainRuleValid(dr))
	if equality.Semantic.DeepEqual(dr.Status, status) {
		return reconcile.Result{}, nil
	}
	orig := dr.DeepCopy()
	dr.Status = status
	if err := r.Client.Status().Patch(ctx, dr, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ruleValidated(r.Recorder, orig, dr)
	return reconcile.Result{}, nil
}

// drainRuleValid is the Valid condition of the rule, from drain.Rules.Errors.
func drainRuleValid(dr *nodemaintv1alpha1.DrainRule) metav1.Condition {
	c := metav1.Condition{Type: nodemaintv1alpha1.ConditionValid, ObservedGeneration: dr.Generation,
		Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonValid, Message: "every selector parses"}
	if errs := drain.NewRules([]nodemaintv1alpha1.DrainRule{*dr}).Errors(); len(errs) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidSelector
		c.Message = errors.Join(errs...).Error() +
			"; the drain holds every pod this rule could match, on every node it could apply to, until the rule is fixed or deleted"
		if len(c.Message) > maxConditionMessageLen {
			c.Message = c.Message[:maxConditionMessageLen]
		}
	}
	return c
}

// SetupWithManager registers the reconciler; it looks at spec changes only.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("drainrule").
		For(&nodemaintv1alpha1.DrainRule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
