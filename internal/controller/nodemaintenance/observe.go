package nodemaintenance

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// observation is everything a reconcile of a NodeMaintenance decides from, read once from the
// cache before anything is decided.
type observation struct {
	nm *nodemaintv1alpha1.NodeMaintenance
	// nodes are the selected nodes, sel the selector and total the nodes of the cluster.
	nodes []*corev1.Node
	sel   maintenance.Selector
	total int
	// observed is each selected node as the node controller observes it (in the order of
	// nodes): the status reports the node controller's decisions, not a computation of its own.
	observed []nodedecide.Observation
	// unschedulable names the pods created since the rollout started that the scheduler cannot
	// place; only with spec.rollout.
	unschedulable []string
	// alerts names the firing alerts spec.rollout.haltOnAlerts selects, alertsUnknown why they
	// cannot be told, alertsFresh until when the answer counts; only with haltOnAlerts.
	alerts        []string
	alertsUnknown string
	alertsFresh   time.Time
	// preflight is the maintenance's preflight as the worker has it, planning whether to look
	// again for it, and preflightTooMany that it selects more nodes than the worker computes
	// the preflight of, news for this spec (see preflightworker.Worker.Status).
	preflight                  *nodemaintv1alpha1.PreflightStatus
	planning, preflightTooMany bool
	// podDeletionDenied: the controller may not delete pods (permissions.PodDeletion).
	podDeletionDenied bool
}

// observe reads what the reconcile of nm decides from.
func (r *Reconciler) observe(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, now time.Time) (observation, error) {
	o := observation{nm: nm, podDeletionDenied: r.PodDeletion.Denied()}
	o.nodes, o.sel, o.total = observe.SelectedNodes(r.nodes, nm)
	obs := &observe.Observer{Client: r.Client, Pods: r.pods, OwnPods: r.OwnPods, Refusals: r.Refusals, Active: &r.active, Written: r.Written,
		Protocol: protocol.For(r.Protocol, r.Client, r.stores), PodDeletion: r.PodDeletion}
	v, err := obs.View(ctx)
	if err != nil {
		return o, err
	}
	o.observed = make([]nodedecide.Observation, 0, len(o.nodes))
	for _, node := range o.nodes {
		n, _, err := obs.Observe(ctx, v, node)
		if err != nil {
			return o, err
		}
		o.observed = append(o.observed, n)
	}
	if nm.Spec.Rollout != nil {
		if o.unschedulable, err = unschedulableSince(ctx, r.Client, nm); err != nil {
			return o, err
		}
		if sel := nm.Spec.Rollout.HaltOnAlerts; sel != nil {
			o.alerts, o.alertsUnknown, o.alertsFresh = r.observeAlerts(sel, now)
		}
	}
	if r.preflights != nil {
		targets := make([]string, 0, len(o.nodes))
		for _, n := range o.nodes {
			targets = append(targets, n.Name)
		}
		o.preflight, o.planning, o.preflightTooMany = r.preflights.Status(nm, targets, now)
	}
	return o, nil
}

// observeAlerts tells the firing alerts the selector selects, or why they cannot be told (the
// rollout then halts as well: a health gate that cannot be read is not open), from the alert
// reader's last answer: it never waits on Prometheus.
func (r *Reconciler) observeAlerts(sel *nodemaintv1alpha1.AlertSelector, now time.Time) (names []string, unknown string, fresh time.Time) {
	if r.Alerts == nil {
		return nil, "the controller reads no Prometheus: start it with --prometheus-url", time.Time{}
	}
	firing, unknown, fresh := r.Alerts.Answer().Gate(now)
	return alerts.Selected(firing, sel), unknown, fresh
}
