package controller

import (
	"context"
	"io"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/preflight"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets,verbs=list
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=list

// preflightRefresh is how often the preflight of a Planning maintenance is computed again.
const preflightRefresh = 30 * time.Second

// preflightStatus is the preflight of a Planning maintenance's selected nodes, as `kubectl
// maintenance preflight` computes it: the status's own while it is younger than preflightRefresh
// and of the same spec, else computed again. It lists from the API server (APIReader), not the
// cache: PodDisruptionBudgets, StatefulSets and autoscalers are not worth an informer for a
// maintenance that is only planned; one read serves every Planning maintenance (preflightReads).
// Nil when the maintenance is not Planning.
func (r *NodeMaintenanceReconciler) preflightStatus(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, nodes []nodeDecision, now time.Time) (*nodemaintv1alpha1.PreflightStatus, error) {
	if r.APIReader == nil || maintenance.Phase(nm, false) != nodemaintv1alpha1.PhasePlanning || len(nodes) == 0 {
		return nil, nil
	}
	if old := nm.Status.Preflight; old != nil && nm.Status.ObservedGeneration == nm.Generation && now.Sub(old.Time.Time) < preflightRefresh {
		return old, nil
	}
	// A maintenance's first preflight of a generation reads the cluster as it is now: a shared
	// read could be older than the nodes and pods its spec was written for.
	first := nm.Status.Preflight == nil || nm.Status.ObservedGeneration != nm.Generation
	in, err := r.preflightReads.read(ctx, r.APIReader, now, first)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		in.Targets = append(in.Targets, n.name)
	}
	if nm.Spec.Rollout != nil {
		in.MaxUnavailable = rollout.Budget(nm.Spec.Rollout.MaxUnavailable, len(nodes))
	}
	in.IgnoreDrainLabel = nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore
	return preflightOf(preflight.Run(in), now), nil
}

// preflightShare is how old a read of the cluster may be and still serve another maintenance's
// preflight.
const preflightShare = 5 * time.Second

// preflightReads is one read of the cluster (preflight.Read) shared by every Planning maintenance
// whose preflight is computed within preflightShare of it: reads one at a time, and at most one
// per preflightShare however many maintenances are Planning (each of which read the whole cluster
// every preflightRefresh before, eight at a time), and none older than that, so that a
// maintenance's preflight still sees what changed just before it. The read is forgotten
// preflightShare after it was made: the memory of a large cluster's objects is not held in
// between. The zero value is ready to use.
type preflightReads struct {
	mu sync.Mutex
	// last is the last read, nil once forgotten; gen counts the reads, so that the timer of an
	// older one does not forget a newer.
	last *preflight.Input
	at   time.Time
	gen  int
}

// read returns the last read when it was made within preflightShare of now and fresh is false,
// else reads anew.
// The objects of the Input it returns are shared: read only.
func (p *preflightReads) read(ctx context.Context, c client.Reader, now time.Time, fresh bool) (preflight.Input, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !fresh && p.last != nil && now.Sub(p.at) < preflightShare && !now.Before(p.at) {
		return *p.last, nil
	}
	in, err := preflight.Read(ctx, c, io.Discard)
	if err != nil {
		return in, err
	}
	p.gen++
	p.last, p.at = &in, now
	gen := p.gen
	time.AfterFunc(preflightShare, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.gen == gen {
			p.last = nil
		}
	})
	return in, nil
}

// preflightOf is the status of a preflight report: what blocks and what is lost, worst first,
// then by node, within the CRD's bounds.
func preflightOf(report preflight.Report, now time.Time) *nodemaintv1alpha1.PreflightStatus {
	out := &nodemaintv1alpha1.PreflightStatus{Time: metav1.NewTime(now.Truncate(time.Second)), Assumption: cut(report.Assumption, 512)}
	var findings []nodemaintv1alpha1.PreflightFinding
	for _, n := range report.Nodes {
		switch n.Verdict {
		case preflight.Blocks:
			out.NodesBlocked++
		case preflight.Loses:
			out.NodesLosing++
		}
		for _, f := range n.Findings {
			if f.Severity != preflight.Blocks && f.Severity != preflight.Loses {
				continue
			}
			findings = append(findings, nodemaintv1alpha1.PreflightFinding{
				Node: n.Name, Severity: string(f.Severity), Reason: f.Reason, Object: cut(f.Object, 512), Message: cut(f.Message, 512),
				Pods: f.Pods[:min(len(f.Pods), 5)], Count: int32(len(f.Pods)),
			})
		}
	}
	sort.SliceStable(findings, func(i, j int) bool {
		if findings[i].Severity != findings[j].Severity {
			return findings[i].Severity == string(preflight.Blocks)
		}
		return findings[i].Node < findings[j].Node
	})
	if len(findings) > nodemaintv1alpha1.MaxPreflightFindings {
		out.FindingsNotListed = int32(len(findings) - nodemaintv1alpha1.MaxPreflightFindings)
		findings = findings[:nodemaintv1alpha1.MaxPreflightFindings]
	}
	out.Findings = findings
	return out
}
