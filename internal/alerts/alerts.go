// Package alerts reads the Prometheus alerts that firing halt a rollout
// (spec.rollout.haltOnAlerts), as kured's --prometheus-url and alert filter do for reboots.
//
// One Reader, a manager Runnable, polls Prometheus's /api/v1/alerts in the background and keeps
// its last Answer; the NodeMaintenance reconciler reads that Answer without waiting and decides
// from it purely: Answer.Gate tells the firing alerts or why they cannot be told (no answer yet,
// Prometheus unreachable, an answer unusable or too old: the gate is then closed), and Selected
// picks the alerts a maintenance selects. When the answer changes, the Reader says so on a
// channel, and the maintenances that wait on it are reconciled.
package alerts

import (
	"slices"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Alert is a firing alert: its name (the alertname label) and its labels.
type Alert struct {
	Name   string
	Labels map[string]string
}

// Selected names the alerts the selector selects, sorted, each once.
func Selected(firing []Alert, sel *nodemaintv1alpha1.AlertSelector) []string {
	var out []string
	for _, a := range firing {
		if len(sel.AlertNames) > 0 && !slices.Contains(sel.AlertNames, a.Name) {
			continue
		}
		matches := true
		for k, v := range sel.MatchLabels {
			matches = matches && a.Labels[k] == v
		}
		if matches {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
