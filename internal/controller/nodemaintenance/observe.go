package nodemaintenance

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/nodemaintenance/nodemaintenancedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// observe reads what the reconcile of nm decides from.
func (r *Reconciler) observe(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, now time.Time) (nodemaintenancedecide.Observation, error) {
	obs := r.Observer
	o := nodemaintenancedecide.Observation{Maintenance: nm, PodDeletionDenied: obs.PodDeletion.Denied()}
	o.Nodes, o.Selector, o.Total = obs.SelectedNodes(nm)
	v, err := obs.View(ctx)
	if err != nil {
		return o, err
	}
	o.Reports = make([]nodedecide.Report, 0, len(o.Nodes))
	for _, node := range o.Nodes {
		rep, err := r.report(ctx, v, node, now)
		if err != nil {
			return o, err
		}
		o.Reports = append(o.Reports, rep)
	}
	if nm.Spec.Rollout != nil {
		if o.Unschedulable, err = unschedulableSince(ctx, r.Client, nm); err != nil {
			return o, err
		}
		if sel := nm.Spec.Rollout.HaltOnAlerts; sel != nil {
			o.Alerts, o.AlertsUnknown, o.AlertsFresh = r.observeAlerts(sel, now)
		}
	}
	if r.preflights != nil {
		targets := make([]string, 0, len(o.Nodes))
		for _, n := range o.Nodes {
			targets = append(targets, n.Name)
		}
		o.Preflight, o.Planning, o.PreflightTooMany = r.preflights.Status(nm, targets, now)
	}
	return o, nil
}

// report is the node controller's report of the node (observe.Reports) or, when it has none
// decided from the node and its maintenances as they are now (after a restart, or before it
// looked again since they changed), the report of its decision made here as it would make it.
func (r *Reconciler) report(ctx context.Context, v *observe.View, node *corev1.Node, now time.Time) (nodedecide.Report, error) {
	obs := r.Observer
	if rep, ok := obs.Reports.Of(node, obs.Selecting(v, node)); ok {
		return rep, nil
	}
	n, _, err := obs.Observe(ctx, v, node)
	if err != nil {
		return nodedecide.Report{}, err
	}
	return nodedecide.Decide(n, now).Report, nil
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

// unschedulableSince names the pods created since the maintenance's rollout started (its drain,
// or its creation) that the scheduler cannot place: replacements of evacuated pods among them, or
// anything else the capacity the rollout takes away leaves unplaced. They halt the rollout.
func unschedulableSince(ctx context.Context, c client.Reader, nm *nodemaintv1alpha1.NodeMaintenance) ([]string, error) {
	since := nm.CreationTimestamp.Time
	if nm.Status.DrainStartTime != nil {
		since = nm.Status.DrainStartTime.Time
	}
	pods, err := observe.UnschedulablePods(ctx, c)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range pods {
		pod := &pods[i]
		if pod.CreationTimestamp.Time.Before(since) || !maintenance.Targeted(pod) {
			continue
		}
		names = append(names, pod.Namespace+"/"+pod.Name)
	}
	return names, nil
}
