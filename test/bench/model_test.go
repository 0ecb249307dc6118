package main

import (
	"math"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

func TestFitLine(t *testing.T) {
	l := fitLine([]float64{100, 200, 400}, []float64{30, 50, 90})
	if math.Abs(l.a-10) > 1e-9 || math.Abs(l.b-0.2) > 1e-9 {
		t.Errorf("fit of y = 10 + 0.2x: %+v", l)
	}
	if got := fitLine([]float64{5, 5}, []float64{1, 3}); got != (line{a: 2}) {
		t.Errorf("fit at a single x: %+v, want flat through the mean", got)
	}
}

// fleetReport is a report of nodemaint's run of F at nodes, whose controller spent cpu seconds.
func fleetReport(nodes int, cpu float64) *Report {
	return &Report{Scenarios: []ScenarioResult{{Name: "F", Nodes: nodes, Pods: 10 * nodes, Runs: []RunResult{
		{Method: MethodNodemaint, ControllerCPUSeconds: ptr.To(cpu), ControllerPeakRSSMiB: ptr.To(50 + float64(nodes)/10),
			ClientRequests: map[string]float64{"PATCH": float64(nodes) * 30}, WatchEvents: map[string]float64{"Pod": float64(nodes) * 40}},
		{Method: MethodClassic},
	}}}}
}

// Fitted at three sizes, the model predicts 1,000 and 5,000 nodes from the line through them; a
// fourth, larger size is left out of the fit and checks it.
func TestRenderModel(t *testing.T) {
	reports := []*Report{fleetReport(100, 30), fleetReport(200, 50), fleetReport(400, 90)}
	out, err := renderModel(reports)
	if err != nil {
		t.Fatal(err)
	}
	// CPU: 10 + 0.2 a node, 0.02 a pod; 210 at 1,000, 1,010 at 5,000.
	for _, want := range []string{"fitted at 100, 200, 400 nodes", "controller CPU (s)  10", "0.2", "0.02", "210", "1,010"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("model without %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "predicted / measured") {
		t.Errorf("a check column without a fourth size:\n%s", out)
	}
	out, err = renderModel(append(reports, fleetReport(600, 150)))
	if err != nil {
		t.Fatal(err)
	}
	// The line predicts 130 at 600 nodes; 150 measured is 15% more.
	if !strings.Contains(out, "130 / 150 (+15%)") {
		t.Errorf("the check at 600 nodes is not the prediction beside the measure:\n%s", out)
	}
	if strings.Contains(out, "at 600\t") || strings.Contains(out, "fitted at 100, 200, 400, 600") {
		t.Errorf("the check size was fitted:\n%s", out)
	}
	if _, err := renderModel(reports[:2]); err == nil {
		t.Error("a model of two sizes, want an error")
	}
}
