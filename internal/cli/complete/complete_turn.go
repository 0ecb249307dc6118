package complete

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/progress"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// Completing a node's turn in a rollout with release Manual: `kubectl maintenance complete NODE`
// adds the maintenance's name to the node annotation nodemaint.dev/complete, and the controller
// releases the node (restores and uncordons it) and starts the next one.

// turnToComplete is a node whose turn in a rollout complete ends.
type turnToComplete struct {
	node string
	nm   string
}

// turnResolver finds the rollouts in which complete ends the named nodes' turns. It reads each
// NodeMaintenance once.
type turnResolver struct {
	c   client.Client
	nms map[string]*nodemaintv1alpha1.NodeMaintenance // nil: not found
}

func (r *turnResolver) get(ctx context.Context, name string) (*nodemaintv1alpha1.NodeMaintenance, error) {
	if nm, ok := r.nms[name]; ok {
		return nm, nil
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	err := r.c.Get(ctx, client.ObjectKey{Name: name}, nm)
	switch {
	case apierrors.IsNotFound(err):
		nm = nil
	case err != nil:
		return nil, fmt.Errorf("getting NodeMaintenance %s: %w", name, err)
	}
	r.nms[name] = nm
	return nm, nil
}

// rollouts are the maintenances with spec.rollout that the node's annotation lists and in which
// its turn has not ended (in its turn, or waiting for it), by name; when there are none, those in
// which it ended (so that complete run again says so).
func (r *turnResolver) rollouts(ctx context.Context, node *corev1.Node) ([]string, error) {
	var open, ended []string
	for _, e := range maintenance.NodeEntries(node) {
		nm, err := r.get(ctx, e.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case nm == nil || nm.Spec.Rollout == nil:
		case rollout.Ended(e.Phase):
			ended = append(ended, e.Name)
		default:
			open = append(open, e.Name)
		}
	}
	if len(open) == 0 {
		open = ended
	}
	sort.Strings(open)
	return open, nil
}

// resolve decides, for each named node, the rollout in which complete ends its turn: the one
// named (--maintenance), or else the one rollout the node's annotation lists with its turn not
// ended. found is false, with no error, when no maintenance is named and no named node is in a
// rollout: complete then completes the NodeMaintenance named after the nodes, as it always did.
// derived is that maintenance's name: when it exists besides a rollout, what to complete is
// ambiguous, and resolve refuses. It refuses, naming the nodes, a node that is in no rollout or in
// several, that waits for its turn, and a rollout that complete cannot release (release not
// Manual). already lists the nodes whose turn ended or was completed before: nothing to do.
func (r *turnResolver) resolve(ctx context.Context, nodes []*corev1.Node, named, derived string) (turns []turnToComplete, already []string, found bool, err error) {
	var problems []string
	choice := make([]string, len(nodes))
	if named != "" {
		for i := range nodes {
			choice[i] = named
		}
	} else {
		var in []string // the rollouts the named nodes are in
		for i, node := range nodes {
			rs, err := r.rollouts(ctx, node)
			if err != nil {
				return nil, nil, false, err
			}
			switch len(rs) {
			case 0:
				problems = append(problems, fmt.Sprintf("node %s is in no rollout", node.Name))
			case 1:
				choice[i] = rs[0]
				in = append(in, rs[0])
			default:
				problems = append(problems, fmt.Sprintf("node %s is in the rollouts %s: name one with --maintenance", node.Name, strings.Join(rs, ", ")))
				in = append(in, rs...)
			}
		}
		if len(in) == 0 {
			return nil, nil, false, nil
		}
		if d, err := r.get(ctx, derived); err != nil {
			return nil, nil, false, err
		} else if d != nil && d.Spec.Rollout == nil {
			sort.Strings(in)
			return nil, nil, true, fmt.Errorf("NodeMaintenance %s maintains these nodes, and they are in the rollout %s: say which to complete, --name %s (the whole maintenance) or --maintenance %s (the nodes' turn): nothing changed",
				derived, in[0], derived, in[0])
		}
	}
	for i, node := range nodes {
		if choice[i] == "" {
			continue
		}
		nm, err := r.get(ctx, choice[i])
		if err != nil {
			return nil, nil, true, err
		}
		if nm == nil {
			return nil, nil, true, fmt.Errorf("no NodeMaintenance %s: nothing changed", choice[i])
		}
		entries := maintenance.NodeEntries(node)
		if ended := rollout.Recorded(nm.Name, entries); ended != "" && nm.Spec.Rollout != nil {
			already = append(already, fmt.Sprintf("node/%s: its turn in nodemaintenance.nodemaint.dev/%s already ended (%s)", node.Name, nm.Name, ended))
			continue
		}
		if err := completable(nm); err != nil {
			return nil, nil, true, fmt.Errorf("%w: nothing changed", err)
		}
		switch {
		case rollout.Turn(nm, node.Name) != nil && rollout.Completed(nm.Name, node):
			already = append(already, fmt.Sprintf("node/%s: its turn in nodemaintenance.nodemaint.dev/%s is already completed; nodemaint releases it", node.Name, nm.Name))
		case rollout.Turn(nm, node.Name) != nil:
			turns = append(turns, turnToComplete{node: node.Name, nm: nm.Name})
		case listsMaintenance(entries, nm.Name):
			problems = append(problems, fmt.Sprintf("node %s waits for its turn in %s: complete a node once its turn started", node.Name, nm.Name))
		default:
			problems = append(problems, fmt.Sprintf("node %s is not in the rollout %s", node.Name, nm.Name))
		}
	}
	switch len(problems) {
	case 0:
		return turns, already, true, nil
	case 1:
		return nil, nil, true, fmt.Errorf("%s: nothing changed", problems[0])
	}
	return nil, nil, true, fmt.Errorf("nothing changed:\n  %s", strings.Join(problems, "\n  "))
}

// completable refuses a maintenance in which complete ends no node's turn.
func completable(nm *nodemaintv1alpha1.NodeMaintenance) error {
	switch {
	case nm.Spec.Rollout == nil:
		return fmt.Errorf("NodeMaintenance %s does not roll (no spec.rollout): complete it as a whole with `kubectl maintenance complete --name %s`", nm.Name, nm.Name)
	case progress.Release(nm.Spec.Rollout) != nodemaintv1alpha1.ReleaseManual:
		return fmt.Errorf("NodeMaintenance %s releases a node by itself (release %s), not on complete; to end it for every node: `kubectl maintenance complete --name %s`",
			nm.Name, progress.Release(nm.Spec.Rollout), nm.Name)
	case !nm.Spec.Cordon && !nm.Spec.Drain:
		return fmt.Errorf("NodeMaintenance %s neither cordons nor drains: no node is in its turn", nm.Name)
	}
	return nil
}

// listsMaintenance reports whether the node's annotation (its entries, maintenance.NodeEntries)
// lists the maintenance.
func listsMaintenance(entries []maintenance.NodeEntry, name string) bool {
	for _, e := range entries {
		if e.Name == name {
			return true
		}
	}
	return false
}

// withName adds name to a comma-separated list of names, unless it is there; the others stay
// as they are.
func withName(list, name string) string {
	for _, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == name {
			return list
		}
	}
	if strings.TrimSpace(list) == "" {
		return name
	}
	return list + "," + name
}

// completeTurn adds the maintenance's name to the node's annotation nodemaint.dev/complete, with
// a patch of that annotation under an optimistic lock, read again on a conflict: the names others
// wrote there stay.
func completeTurn(ctx context.Context, c client.Client, out io.Writer, t turnToComplete, suffix string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: t.node}, node); err != nil {
			return err
		}
		want := withName(node.Annotations[nodemaintv1alpha1.CompleteAnnotation], t.nm)
		if want == node.Annotations[nodemaintv1alpha1.CompleteAnnotation] {
			return nil
		}
		orig := node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[nodemaintv1alpha1.CompleteAnnotation] = want
		return c.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("completing the turn of node %s in %s: %w", t.node, t.nm, err)
	}
	fmt.Fprintf(out, "node/%s: turn in nodemaintenance.nodemaint.dev/%s completed%s; nodemaint releases the node and starts the next\n", t.node, t.nm, suffix)
	return nil
}
