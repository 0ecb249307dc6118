package main

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// modelSizes are the fleets the model predicts beyond the sizes measured.
var modelSizes = []int{1000, 5000}

// fleetRun is nodemaint's run of scenario F at one pool size.
type fleetRun struct {
	nodes, pods int
	run         RunResult
}

// modelFigure is one of the controller's figures the model fits: its value in a run.
type modelFigure struct {
	name  string
	value func(RunResult) (float64, bool)
}

// modelFigures are what the model predicts: the controller's CPU, its peak memory, its own API
// requests and the watch events its informers received, over the whole rollout.
var modelFigures = []modelFigure{
	{"controller CPU (s)", func(r RunResult) (float64, bool) { return deref(r.ControllerCPUSeconds) }},
	{"controller peak RSS (MiB)", func(r RunResult) (float64, bool) { return deref(r.ControllerPeakRSSMiB) }},
	{"own API requests", func(r RunResult) (float64, bool) { return total(r.ClientRequests), len(r.ClientRequests) > 0 }},
	{"watch events", func(r RunResult) (float64, bool) { return total(r.WatchEvents), len(r.WatchEvents) > 0 }},
}

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// fleetRuns are nodemaint's runs of scenario F in the reports (pod conditions; the runs through
// EvictionRequests apart), one a pool size: a later report's replaces an earlier one's.
func fleetRuns(reports []*Report) []fleetRun {
	bySize := map[int]fleetRun{}
	for _, r := range reports {
		for _, s := range r.Scenarios {
			if s.Name != "F" {
				continue
			}
			for _, run := range s.Runs {
				if run.Method == MethodNodemaint {
					bySize[s.Nodes] = fleetRun{nodes: s.Nodes, pods: s.Pods, run: run}
				}
			}
		}
	}
	var out []fleetRun
	for _, fr := range bySize {
		out = append(out, fr)
	}
	slices.SortFunc(out, func(a, b fleetRun) int { return a.nodes - b.nodes })
	return out
}

// line is y = a + b·x.
type line struct{ a, b float64 }

func (l line) at(x float64) float64 { return l.a + l.b*x }

// fitLine is the least-squares line through the points; with a single x it is flat through
// their mean.
func fitLine(xs, ys []float64) line {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	if n == 0 {
		return line{}
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return line{a: sy / n}
	}
	b := (n*sxy - sx*sy) / den
	return line{a: (sy - b*sx) / n, b: b}
}

// renderModel fits each figure of nodemaint's F runs against the pool's nodes, a line (what a
// rollout costs regardless of size, and what each node with its ten pods adds), and prints it
// with what it predicts for 1,000 and 5,000 nodes. With four sizes or more, the largest is
// left out of the fit and checks it: its measured figure beside the prediction.
func renderModel(reports []*Report) (string, error) {
	runs := fleetRuns(reports)
	if len(runs) < 3 {
		return "", fmt.Errorf("the model needs nodemaint's runs of scenario F at three pool sizes at least, have %d", len(runs))
	}
	fit, check := runs, (*fleetRun)(nil)
	if len(runs) >= 4 {
		fit, check = runs[:len(runs)-1], &runs[len(runs)-1]
	}
	sizes := make([]string, len(fit))
	for i, fr := range fit {
		sizes[i] = thousands(fr.nodes)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "Model of the controller in scenario F, fitted at %s nodes (ten pods a node):\n", strings.Join(sizes, ", "))
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	header := []string{"figure", "fixed", "a node", "a pod"}
	for _, fr := range fit {
		header = append(header, "at "+thousands(fr.nodes))
	}
	for _, n := range modelSizes {
		header = append(header, "predicted at "+thousands(n))
	}
	if check != nil {
		header = append(header, fmt.Sprintf("at %s: predicted / measured", thousands(check.nodes)))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, f := range modelFigures {
		var xs, ys []float64
		cells := []string{}
		for _, fr := range fit {
			v, ok := f.value(fr.run)
			if !ok {
				cells = append(cells, "—")
				continue
			}
			xs, ys = append(xs, float64(fr.nodes)), append(ys, v)
			cells = append(cells, fmtModel(v))
		}
		if len(xs) < 3 {
			fmt.Fprintf(tw, "%s\tnot measured at three sizes\n", f.name)
			continue
		}
		l := fitLine(xs, ys)
		podsPerNode := float64(fit[0].pods) / float64(fit[0].nodes)
		row := []string{f.name, fmtModel(l.a), fmtModel(l.b), fmtModel(l.b / podsPerNode)}
		row = append(row, cells...)
		for _, n := range modelSizes {
			row = append(row, fmtModel(l.at(float64(n))))
		}
		if check != nil {
			predicted := l.at(float64(check.nodes))
			if v, ok := f.value(check.run); ok {
				row = append(row, fmt.Sprintf("%s / %s (%+.0f%%)", fmtModel(predicted), fmtModel(v), 100*(v-predicted)/predicted))
			} else {
				row = append(row, fmtModel(predicted)+" / —")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// fmtModel writes a figure of the model with three significant digits, or whole with commas
// between thousands from a thousand on.
func fmtModel(v float64) string {
	if math.Abs(v) < 1000 {
		return fmt.Sprintf("%.3g", v)
	}
	if v < 0 {
		return "-" + thousands(int(math.Round(-v)))
	}
	return thousands(int(math.Round(v)))
}
