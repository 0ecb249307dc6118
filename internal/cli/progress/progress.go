package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
)

// Follow watches the NodeMaintenance until it is drained or the timeout passes. On a terminal it
// redraws a table of its nodes in place; otherwise it prints a line whenever the progress changes.
// It follows with client-go's watchtools.UntilWithSync: an informer on that one object, which
// lists and watches again when the server ends a watch or its resourceVersion is too old.
func Follow(ctx context.Context, out io.Writer, c client.WithWatch, name string, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var show func(*nodemaintv1alpha1.NodeMaintenance)
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		show = liveDisplay(out)
	} else {
		show = lineDisplay(out)
	}
	deleted := fmt.Errorf("NodeMaintenance %s was deleted", name)
	var last *nodemaintv1alpha1.NodeMaintenance
	// seen shows nm and says whether following it is over: drained, or never will be.
	seen := func(nm *nodemaintv1alpha1.NodeMaintenance) (bool, error) {
		last = nm
		show(nm)
		if drained(nm) {
			fmt.Fprintln(out, doneLine(nm))
			return true, nil
		}
		return false, selectsNoNode(nm)
	}
	var done bool
	_, err := watchtools.UntilWithSync(ctx, nameListWatch(c, name), &nodemaintv1alpha1.NodeMaintenance{},
		// Once listed: it must exist, and may already be done.
		func(store cache.Store) (bool, error) {
			obj, exists, err := store.GetByKey(name)
			if err != nil {
				return false, err
			}
			if !exists {
				return false, deleted
			}
			done, err = seen(obj.(*nodemaintv1alpha1.NodeMaintenance))
			return done, err
		},
		func(ev watch.Event) (bool, error) {
			nm, ok := ev.Object.(*nodemaintv1alpha1.NodeMaintenance)
			if !ok || nm.Name != name {
				return false, nil
			}
			if ev.Type == watch.Deleted {
				return false, deleted
			}
			done, err := seen(nm)
			return done, err
		})
	if err != nil {
		if ctx.Err() != nil {
			return waitError(ctx, last, ctx.Err())
		}
		return err
	}
	return nil
}

// nameListWatch lists and watches the NodeMaintenance name, and no other.
func nameListWatch(c client.WithWatch, name string) cache.ListerWatcher {
	byName := func(opts metav1.ListOptions) *client.ListOptions {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		return &client.ListOptions{Raw: &opts, Limit: opts.Limit, Continue: opts.Continue}
	}
	// A client that cannot stream the initial list as watch events (a fake) says so, and is listed.
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			var list nodemaintv1alpha1.NodeMaintenanceList
			return &list, c.List(ctx, &list, byName(opts))
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &nodemaintv1alpha1.NodeMaintenanceList{}, byName(opts))
		},
	}, c)
}

// doneLine is the last line of a drain followed to its end.
func doneLine(nm *nodemaintv1alpha1.NodeMaintenance) string {
	if nm.Spec.Rollout != nil {
		return fmt.Sprintf("nodemaintenance.nodemaint.dev/%s: drained, every node in its turn, and released", nm.Name)
	}
	return fmt.Sprintf("nodemaintenance.nodemaint.dev/%s: drained", nm.Name)
}

// drained reports whether the NodeMaintenance is drained, with the status it saw.
func drained(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return nm.Status.ObservedGeneration == nm.Generation &&
		meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
}

// selectsNoNode is an error when the controller reports that the NodeMaintenance selects no node:
// it is then never drained, and waiting for it would never end.
func selectsNoNode(nm *nodemaintv1alpha1.NodeMaintenance) error {
	c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
	if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != nm.Generation || nm.Status.ObservedGeneration != nm.Generation {
		return nil
	}
	return fmt.Errorf("NodeMaintenance %s drains nothing: %s (%s); remove it with `kubectl maintenance complete --name %s --delete`",
		nm.Name, c.Message, c.Reason, nm.Name)
}

// waitError turns the end of a wait into an error naming what is left.
func waitError(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, err error) error {
	if ctx.Err() == nil || nm == nil {
		return err
	}
	var b strings.Builder
	if nm.Spec.Rollout != nil {
		fmt.Fprintf(&b, "timed out waiting for the rollout of NodeMaintenance %s: %s; %d pods pending on the nodes in their turn",
			nm.Name, rolloutProgress(nm), nm.Status.PodsPendingEvacuation)
	} else {
		fmt.Fprintf(&b, "timed out waiting for NodeMaintenance %s to drain: %d pods pending", nm.Name, nm.Status.PodsPendingEvacuation)
	}
	for _, line := range BlockingLines(nm) {
		b.WriteString("\n  " + line)
	}
	return &clioptions.ExitCodeError{Code: clioptions.ExitTimedOut, Err: fmt.Errorf("%s", b.String())}
}

// nodeNames returns the NodeMaintenance's nodes, sorted.
func nodeNames(nm *nodemaintv1alpha1.NodeMaintenance) []string {
	names := make([]string, 0, len(nm.Status.Nodes))
	for n := range nm.Status.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BlockingLines says what holds each node the status lists: "node: Reason (count) ns/pod, ...:
// message", and how many nodes it does not list.
func BlockingLines(nm *nodemaintv1alpha1.NodeMaintenance) []string {
	var lines []string
	for _, n := range nodeNames(nm) {
		if by := nm.Status.Nodes[n].RemovedBy; by != "" {
			lines = append(lines, fmt.Sprintf("%s: %s is removing the node; the maintenance drains it on and does not hold it", n, by))
		}
		for _, b := range nm.Status.Nodes[n].Blocked {
			lines = append(lines, fmt.Sprintf("%s: %s (%d) %s: %s", n, b.Reason, b.Count, strings.Join(b.Pods, ", "), b.Message))
		}
	}
	if l := notListedLine(nm); l != "" {
		lines = append(lines, l)
	}
	return lines
}

// notListedLine says how many nodes with something to report the status leaves out, if any.
func notListedLine(nm *nodemaintv1alpha1.NodeMaintenance) string {
	if nm.Status.NodesNotListed == 0 {
		return ""
	}
	return fmt.Sprintf("%d more nodes not listed: the status details at most %d nodes, those with the most pods pending",
		nm.Status.NodesNotListed, nodemaintv1alpha1.MaxStatusNodes)
}

// Summary is one line about the whole maintenance.
func Summary(nm *nodemaintv1alpha1.NodeMaintenance) string {
	if nm.Status.ObservedGeneration == 0 {
		return nm.Name + ": waiting for nodemaint-controller to pick it up"
	}
	if nm.Spec.Rollout != nil {
		return rolloutSummary(nm)
	}
	drainedStatus := "Unknown"
	if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); c != nil {
		drainedStatus = string(c.Status)
	}
	s := nm.Status
	line := fmt.Sprintf("%s: phase %s, %d nodes", nm.Name, s.Phase, s.SelectedNodes)
	if s.SelectedNodes > 0 {
		line += fmt.Sprintf(" (%d with pods pending, %d drained)", s.NodesPending, s.NodesDrained)
	}
	line += fmt.Sprintf(", %d pods pending, %d evacuating by their owners", s.PodsPendingEvacuation, s.PodsEvacuating)
	if s.PodsSkipped > 0 {
		line += fmt.Sprintf(", %d skipped and left running", s.PodsSkipped)
	}
	return line + ", drained " + drainedStatus
}

// WriteNodeTable writes one row per node the status lists: pending, evacuating, skipped, and the
// first thing that blocks it; then how many nodes it does not list. For a rollout, the nodes in
// their turn (writeTurnTable).
func WriteNodeTable(out io.Writer, nm *nodemaintv1alpha1.NodeMaintenance) {
	writeNodeTable(out, nm, false)
}

// WriteWideNodeTable is WriteNodeTable with more columns (status -o wide): the volumes still
// attached, whether nodemaint applied the out-of-service taint, what removed the node, and every
// reason that blocks it.
func WriteWideNodeTable(out io.Writer, nm *nodemaintv1alpha1.NodeMaintenance) {
	writeNodeTable(out, nm, true)
}

func writeNodeTable(out io.Writer, nm *nodemaintv1alpha1.NodeMaintenance, wide bool) {
	if nm.Spec.Rollout != nil {
		writeTurnTable(out, nm, time.Now())
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "NODE\tPENDING\tEVACUATING\tSKIPPED\tBLOCKED BY"
	if wide {
		header = "NODE\tPENDING\tEVACUATING\tSKIPPED\tVOLUMES\tOUT-OF-SERVICE\tREMOVED BY\tBLOCKED BY"
	}
	fmt.Fprintln(tw, header)
	for _, n := range nodeNames(nm) {
		ns := nm.Status.Nodes[n]
		blocked := "-"
		if len(ns.Blocked) > 0 {
			blocked = blockedCell(ns.Blocked[0], len(ns.Blocked)-1)
		}
		if !wide {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", n, ns.PodsPendingEvacuation, ns.PodsEvacuating, ns.PodsSkipped, blocked)
			continue
		}
		if len(ns.Blocked) > 1 {
			cells := make([]string, 0, len(ns.Blocked))
			for _, b := range ns.Blocked {
				cells = append(cells, blockedCell(b, 0))
			}
			blocked = strings.Join(cells, "; ")
		}
		removedBy := ns.RemovedBy
		if removedBy == "" {
			removedBy = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%t\t%s\t%s\n", n, ns.PodsPendingEvacuation, ns.PodsEvacuating, ns.PodsSkipped, ns.VolumesAttached, ns.OutOfService, removedBy, blocked)
	}
	tw.Flush()
	if l := notListedLine(nm); l != "" {
		fmt.Fprintln(out, l)
	}
	if quiet := nm.Status.SelectedNodes - int32(len(nm.Status.Nodes)) - nm.Status.NodesNotListed; quiet > 0 && nm.Status.ObservedGeneration > 0 {
		fmt.Fprintf(out, "%d more nodes with nothing to report\n", quiet)
	}
}

// liveDisplay redraws the summary and node table in place.
func liveDisplay(out io.Writer) func(*nodemaintv1alpha1.NodeMaintenance) {
	lines := 0
	return func(nm *nodemaintv1alpha1.NodeMaintenance) {
		var b strings.Builder
		fmt.Fprintln(&b, Summary(nm))
		WriteNodeTable(&b, nm)
		if lines > 0 {
			fmt.Fprintf(out, "\x1b[%dA\x1b[J", lines) // up to the previous frame, and clear it
		}
		fmt.Fprint(out, b.String())
		lines = strings.Count(b.String(), "\n")
	}
}

// lineDisplay prints the summary and what blocks whenever they change.
func lineDisplay(out io.Writer) func(*nodemaintv1alpha1.NodeMaintenance) {
	var last string
	return func(nm *nodemaintv1alpha1.NodeMaintenance) {
		text := Summary(nm)
		if nm.Spec.Rollout != nil {
			for _, l := range RolloutLines(nm) {
				text += "\n  " + l
			}
		}
		for _, l := range BlockingLines(nm) {
			text += "\n  " + l
		}
		if text != last {
			fmt.Fprintln(out, text)
			last = text
		}
	}
}
