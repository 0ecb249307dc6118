package cli

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
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// follow watches the NodeMaintenance until it is drained or the timeout passes. On a terminal it
// redraws a table of its nodes in place; otherwise it prints a line whenever the progress changes.
func follow(ctx context.Context, o *options, c client.WithWatch, name string, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var show func(*nodemaintv1alpha1.NodeMaintenance)
	if f, ok := o.streams.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		show = liveDisplay(o.streams.Out)
	} else {
		show = lineDisplay(o.streams.Out)
	}
	var last *nodemaintv1alpha1.NodeMaintenance
	for {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list, client.MatchingFields{"metadata.name": name}); err != nil {
			return waitError(ctx, last, err)
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("NodeMaintenance %s was deleted", name)
		}
		last = &list.Items[0]
		show(last)
		if drained(last) {
			fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: drained\n", name)
			return nil
		}
		w, err := c.Watch(ctx, &nodemaintv1alpha1.NodeMaintenanceList{}, &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: list.ResourceVersion},
		})
		if err != nil {
			return waitError(ctx, last, err)
		}
		for ev := range w.ResultChan() {
			nm, ok := ev.Object.(*nodemaintv1alpha1.NodeMaintenance)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				w.Stop()
				return fmt.Errorf("NodeMaintenance %s was deleted", name)
			}
			last = nm
			show(nm)
			if drained(nm) {
				w.Stop()
				fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: drained\n", name)
				return nil
			}
		}
		if ctx.Err() != nil {
			return waitError(ctx, last, ctx.Err())
		}
		// The watch ended (the server closes watches now and then): list and watch again.
	}
}

// waitError turns the end of a wait into an error naming what is left.
func waitError(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, err error) error {
	if ctx.Err() == nil || nm == nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "timed out waiting for NodeMaintenance %s to drain: %d pods pending", nm.Name, nm.Status.PodsPendingEvacuation)
	for _, line := range blockingLines(nm) {
		b.WriteString("\n  " + line)
	}
	return &exitError{code: ExitTimedOut, err: fmt.Errorf("%s", b.String())}
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

// blockingLines says what holds each node: "node: Reason (count) ns/pod, ...: message".
func blockingLines(nm *nodemaintv1alpha1.NodeMaintenance) []string {
	var lines []string
	for _, n := range nodeNames(nm) {
		for _, b := range nm.Status.Nodes[n].Blocked {
			lines = append(lines, fmt.Sprintf("%s: %s (%d) %s: %s", n, b.Reason, b.Count, strings.Join(b.Pods, ", "), b.Message))
		}
	}
	return lines
}

// summary is one line about the whole maintenance.
func summary(nm *nodemaintv1alpha1.NodeMaintenance) string {
	if nm.Status.ObservedGeneration == 0 {
		return nm.Name + ": waiting for nodemaint-controller to pick it up"
	}
	drainedStatus := "Unknown"
	if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); c != nil {
		drainedStatus = string(c.Status)
	}
	return fmt.Sprintf("%s: phase %s, %d nodes, %d pods pending, %d evacuating by their owners, drained %s",
		nm.Name, nm.Status.Phase, nm.Status.SelectedNodes, nm.Status.PodsPendingEvacuation, nm.Status.PodsEvacuating, drainedStatus)
}

// writeNodeTable writes one row per node: pending, evacuating, and the first thing that blocks it.
func writeNodeTable(out io.Writer, nm *nodemaintv1alpha1.NodeMaintenance) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPENDING\tEVACUATING\tBLOCKED BY")
	for _, n := range nodeNames(nm) {
		ns := nm.Status.Nodes[n]
		blocked := "-"
		if len(ns.Blocked) > 0 {
			b := ns.Blocked[0]
			blocked = fmt.Sprintf("%s %s", b.Reason, strings.Join(b.Pods, ","))
			if b.Count > int32(len(b.Pods)) {
				blocked += fmt.Sprintf(" (+%d)", b.Count-int32(len(b.Pods)))
			}
			if len(ns.Blocked) > 1 {
				blocked += fmt.Sprintf("; %d more reasons", len(ns.Blocked)-1)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", n, ns.PodsPendingEvacuation, ns.PodsEvacuating, blocked)
	}
	tw.Flush()
}

// liveDisplay redraws the summary and node table in place.
func liveDisplay(out io.Writer) func(*nodemaintv1alpha1.NodeMaintenance) {
	lines := 0
	return func(nm *nodemaintv1alpha1.NodeMaintenance) {
		var b strings.Builder
		fmt.Fprintln(&b, summary(nm))
		writeNodeTable(&b, nm)
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
		text := summary(nm)
		for _, l := range blockingLines(nm) {
			text += "\n  " + l
		}
		if text != last {
			fmt.Fprintln(out, text)
			last = text
		}
	}
}
