package controller_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// maintenanceSeries gathers the registry and returns the nodemaint_maintenance_* series of the
// maintenance as "name{label=value,...}" → value, the maintenance label left out.
func maintenanceSeries(t *testing.T, maintenance string) (map[string]float64, error) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "nodemaint_maintenance_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			mine := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "maintenance" {
					mine = l.GetValue() == maintenance
					continue
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if mine {
				sort.Strings(labels)
				out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(m)
			}
		}
	}
	return out, nil
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestMaintenanceMetrics: the gauges of a NodeMaintenance follow its status (nodes by phase and
// state, pods by state, conditions), and go with it when it is deleted.
func TestMaintenanceMetrics(t *testing.T) {
	createNode(t, "metrics-node", nil, false)
	createNode(t, "metrics-other", nil, false)
	createPod(t, "metrics-app", "metrics-node")
	drainsBefore := histogramCount(t, "nodemaint_node_drain_duration_seconds")
	createNM(t, "metrics", true, true, "", "metrics-node")
	want := map[string]float64{
		`nodemaint_maintenance_nodes{phase=Drain,state=selected}`:    1,
		`nodemaint_maintenance_nodes{phase=Drain,state=cordoned}`:    1,
		`nodemaint_maintenance_nodes{phase=Drain,state=pending}`:     1,
		`nodemaint_maintenance_nodes{phase=Drain,state=drained}`:     0,
		`nodemaint_maintenance_pods{state=pending_evacuation}`:       1,
		`nodemaint_maintenance_condition{status=False,type=Drained}`: 1,
		`nodemaint_maintenance_condition{status=True,type=Drained}`:  0,
	}
	expectSeries := func(want map[string]float64) {
		t.Helper()
		eventually(t, "metrics of NodeMaintenance metrics", func(ctx context.Context) (bool, string, error) {
			got, err := maintenanceSeries(t, "metrics")
			if err != nil {
				return false, "", err
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					return false, fmt.Sprintf("%s = %v (present %v), want %v; all: %v", k, g, ok, v, got), nil
				}
			}
			return true, "", nil
		})
	}
	expectSeries(want)
	if _, ok := mustSeries(t)[`nodemaint_maintenance_drain_start_timestamp_seconds{}`]; !ok {
		t.Errorf("no nodemaint_maintenance_drain_start_timestamp_seconds for a drain under way")
	}

	// The pod leaves: the node is drained.
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "metrics-app"}})
	expectSeries(map[string]float64{
		`nodemaint_maintenance_nodes{phase=DrainComplete,state=drained}`: 1,
		`nodemaint_maintenance_nodes{phase=DrainComplete,state=pending}`: 0,
		`nodemaint_maintenance_pods{state=pending_evacuation}`:           0,
		`nodemaint_maintenance_condition{status=True,type=Drained}`:      1,
	})

	// The node's drain is timed, once.
	eventually(t, "the node's drain timed", func(context.Context) (bool, string, error) {
		n := histogramCount(t, "nodemaint_node_drain_duration_seconds")
		return n == drainsBefore+1, fmt.Sprintf("%d node drains timed, want %d", n, drainsBefore+1), nil
	})

	deleteNMAndWait(t, "metrics")
	eventually(t, "no metrics of a deleted NodeMaintenance", func(ctx context.Context) (bool, string, error) {
		got, err := maintenanceSeries(t, "metrics")
		return len(got) == 0, fmt.Sprintf("%v", got), err
	})
}

func mustSeries(t *testing.T) map[string]float64 {
	t.Helper()
	got, err := maintenanceSeries(t, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// answers returns how many answers nodemaint_evacuation_answer_duration_seconds counted, by answer.
func answers(t *testing.T) map[string]uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "nodemaint_evacuation_answer_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "answer" {
					out[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// TestEvacuationAnswerMetric: the owners' first answers to nodemaint's requests are counted, by
// answer, whoever wrote them; a later change of answer is not a first answer.
func TestEvacuationAnswerMetric(t *testing.T) {
	createNode(t, "answers-node", nil, false)
	createPod(t, "answers-accepted", "answers-node")
	createPod(t, "answers-declined", "answers-node")
	createPod(t, "answers-late", "answers-node")
	before := answers(t)
	createNM(t, "answers", true, true, "", "answers-node")
	expectRequest(t, "answers-accepted", "True/NodeMaintenance/")
	expectRequest(t, "answers-declined", "True/NodeMaintenance/")
	expectRequest(t, "answers-late", "True/NodeMaintenance/")
	setPodCondition(t, "answers-accepted", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Test"})
	setPodCondition(t, "answers-declined", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "Test"})
	// A change of mind is not a first answer. The pods' changes reach the metric in the order
	// they were written: once a first answer written after it is counted, the change of mind has
	// been seen, and must not have counted.
	setPodCondition(t, "answers-accepted", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "Test"})
	setPodCondition(t, "answers-late", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Test"})
	want := map[string]uint64{"accepted": before["accepted"] + 2, "declined": before["declined"] + 1}
	eventually(t, "answers counted", func(context.Context) (bool, string, error) {
		got := answers(t)
		return got["accepted"] == want["accepted"], fmt.Sprintf("got %v, want %v", got, want), nil
	})
	got := answers(t)
	if got["accepted"] != want["accepted"] {
		t.Errorf("accepted answers = %d, want %d: the change of mind counted as a first answer", got["accepted"], want["accepted"])
	}
	if got["declined"] != want["declined"] {
		t.Errorf("declined answers = %d, want %d", got["declined"], want["declined"])
	}
}

// histogramCount is the number of observations of the unlabelled histogram name.
func histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
