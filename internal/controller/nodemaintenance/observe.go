package nodemaintenance

import (
	"context"
	"time"

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
	o.Observed = make([]nodedecide.Observation, 0, len(o.Nodes))
	for _, node := range o.Nodes {
		n, _, err := obs.Observe(ctx, v, node)
		if err != nil {
			return o, err
		}
		o.Observed = append(o.Observed, n)
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
