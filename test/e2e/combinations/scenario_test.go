package combinations_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/setup"
)

// The generator: everything a batch does is drawn here from its seed, before anything runs, so
// that the seed replays it. Only what the cluster does in between is not replayed.

// protocols are the evacuation protocols batches take in turn (by their seed's parity).
var protocols = []string{setup.ProtocolFlag(nodemaintv1alpha1.EvacuationProtocolPodConditions), setup.ProtocolFlag(nodemaintv1alpha1.EvacuationProtocolEvictionRequest)}

// batch is one batch's draw: its lanes run side by side under one protocol.
type batch struct {
	seed     uint64
	protocol string
	// topology is where its Cluster API Machines live.
	topology topology
	lanes    []scenario
	// kills are when the leader is killed, from the batch's start.
	kills []time.Duration
	// alerts are what the stand-in Prometheus does, from the batch's start: the rollouts with
	// haltOnAlerts wait on gateAlert.
	alerts []alertStep
}

// gateAlert is the alert the rollouts with haltOnAlerts wait on.
const gateAlert = "CombinationsGate"

// alertChange is what the stand-in Prometheus starts doing: it starts answering with no alert
// firing.
type alertChange string

const (
	alertFires        alertChange = "gate alert fires"
	alertClears       alertChange = "gate alert clears"
	prometheusWarns   alertChange = "Prometheus answers with warnings"
	prometheusSilent  alertChange = "Prometheus answers nothing"
	prometheusAnswers alertChange = "Prometheus answers"
)

var alertChanges = []alertChange{alertFires, alertClears, prometheusWarns, prometheusSilent, prometheusAnswers}

// alertStep changes what the stand-in Prometheus does at a time from the batch's start.
type alertStep struct {
	at   time.Duration
	what alertChange
}

// scenario is one lane: its nodes, its workloads and its maintenances.
type scenario struct {
	lane      int
	nodes     []string
	workloads []kind
	nms       []drawnMaintenance
	edits     []edit
	// machine is the lane's Cluster API Machine (machines_test.go); nil: none.
	machine *drawnMachine
}

// drawnMaintenance is a NodeMaintenance and when it is created.
type drawnMaintenance struct {
	name     string
	createAt time.Duration
	spec     nodemaintv1alpha1.NodeMaintenanceSpec
}

// editKind is what an edit does to a maintenance.
type editKind string

const (
	drainOn    editKind = "drain on"  // cordon and drain
	drainOff   editKind = "drain off" // keeps the cordon
	cordonOff  editKind = "cordon off"
	signalOnly editKind = "SignalOnly"
	evict      editKind = "Evict"
	remove     editKind = "delete"
)

// edit changes maintenance nm (an index of the lane's) at a time from the batch's start.
type edit struct {
	at   time.Duration
	nm   int
	what editKind
}

// apply changes spec as the edit says; remove is not a spec change.
func (e editKind) apply(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
	switch e {
	case drainOn:
		spec.Cordon, spec.Drain = true, true
	case drainOff:
		spec.Drain = false
	case cordonOff:
		spec.Cordon, spec.Drain = false, false
	case signalOnly:
		spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	case evict:
		spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicyEvict
	}
}

// drawBatch draws a batch of size s from seed.
func drawBatch(seed uint64, s runSize) batch {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := batch{seed: seed, protocol: protocols[seed%uint64(len(protocols))], topology: topologyOf(seed)}
	for lane := range s.lanes {
		b.lanes = append(b.lanes, drawScenario(rng, lane, s))
	}
	for range s.kills {
		b.kills = append(b.kills, time.Duration(rng.Int64N(int64(s.span))))
	}
	slices.Sort(b.kills)
	// The alert gate, drawn last so that a seed draws the rest as before: half the rollouts wait
	// on gateAlert, and the stand-in Prometheus changes four times.
	for _, sc := range b.lanes {
		for _, nm := range sc.nms {
			if r := nm.spec.Rollout; r != nil && rng.IntN(2) == 0 {
				r.HaltOnAlerts = &nodemaintv1alpha1.AlertSelector{AlertNames: []string{gateAlert}}
			}
		}
	}
	for range 4 {
		b.alerts = append(b.alerts, alertStep{at: time.Duration(rng.Int64N(int64(s.span))), what: alertChanges[rng.IntN(len(alertChanges))]})
	}
	slices.SortStableFunc(b.alerts, func(x, y alertStep) int { return cmp.Compare(x.at, y.at) })
	drawMachines(rng, &b, s)
	return b
}

// topologyOf is the topology of the batch of the seed: (seed + seed/2) mod 2, so that any four
// batches of consecutive seeds (a long run) draw each protocol in each topology.
func topologyOf(seed uint64) topology {
	return []topology{selfHosted, management}[(seed+seed/2)%2]
}

// drawScenario draws lane's scenario: at least three kinds of workload, one to three
// maintenances of its nodes, and up to three edits of each.
func drawScenario(rng *rand.Rand, lane int, s runSize) scenario {
	sc := scenario{lane: lane}
	for i := range s.nodesPerLane {
		sc.nodes = append(sc.nodes, fmt.Sprintf("kwok-node-%d", lane*s.nodesPerLane+i))
	}
	for len(sc.workloads) < 3 {
		sc.workloads = sc.workloads[:0]
		for _, k := range zoo {
			if rng.IntN(100) < 45 {
				sc.workloads = append(sc.workloads, k)
			}
		}
	}
	n := 1 + rng.IntN(3)
	for i := range n {
		nm := drawnMaintenance{name: fmt.Sprintf("lane-%d-%c", lane, 'a'+i), spec: drawSpec(rng, sc.nodes, s)}
		if i > 0 {
			nm.createAt = time.Duration(rng.Int64N(int64(s.span / 2)))
		}
		sc.nms = append(sc.nms, nm)
		for range rng.IntN(4) {
			at := nm.createAt + time.Duration(rng.Int64N(int64(s.span-nm.createAt)))
			what := []editKind{drainOn, drainOn, drainOff, cordonOff, signalOnly, evict, remove}[rng.IntN(7)]
			sc.edits = append(sc.edits, edit{at: at, nm: i, what: what})
		}
	}
	slices.SortStableFunc(sc.edits, func(a, b edit) int { return cmp.Compare(a.at, b.at) })
	return sc
}

// drawSpec draws a spec over a non-empty subset of nodes from the whole spec space the API
// server admits.
func drawSpec(rng *rand.Rand, nodes []string, s runSize) nodemaintv1alpha1.NodeMaintenanceSpec {
	var selected []string
	for len(selected) == 0 {
		for _, n := range nodes {
			if rng.IntN(100) < 60 {
				selected = append(selected, n)
			}
		}
	}
	spec := nodemaintv1alpha1.NodeMaintenanceSpec{
		NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: selected}},
		}}},
		Cordon: rng.IntN(100) < 90,
		Reason: "combinations",
		// Short, so that pods nobody answers for are evicted within the batch; long enough for the
		// Deployment responder to answer on a loaded 2-core machine (through an EvictionRequest it
		// took up to 5s: an answer after the timeout is none, and the pod is evicted through its
		// budget, below its Deployment's replicas).
		EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Duration(10+rng.IntN(11)) * time.Second},
		EvictionPolicy:            nodemaintv1alpha1.EvictionPolicyEvict,
		DrainTimeoutAction:        nodemaintv1alpha1.DrainTimeoutActionReport,
		DrainLabelPolicy:          nodemaintv1alpha1.DrainLabelPolicyHonor,
	}
	spec.Drain = spec.Cordon && rng.IntN(100) < 75
	if rng.IntN(100) < 30 {
		spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	}
	switch r := rng.IntN(100); {
	case r < 35:
		// The least the API server admits with Delete; a short batch ends before it runs out.
		spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
		spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: nodemaintv1alpha1.MinDeleteDrainTimeout}
	case r < 70:
		spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: time.Duration(10+rng.IntN(31)) * time.Second}
	}
	if rng.IntN(100) < 30 {
		spec.DrainLabelPolicy = nodemaintv1alpha1.DrainLabelPolicyIgnore
	}
	if rng.IntN(100) < 30 {
		spec.Rollout = &nodemaintv1alpha1.RolloutSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(1 + rng.IntN(2)))),
			Release:        []nodemaintv1alpha1.ReleasePolicy{nodemaintv1alpha1.ReleaseDrained, nodemaintv1alpha1.ReleaseDrained, nodemaintv1alpha1.ReleaseManual}[rng.IntN(3)],
			OnNodeFailure:  []nodemaintv1alpha1.NodeFailurePolicy{nodemaintv1alpha1.NodeFailurePause, nodemaintv1alpha1.NodeFailureContinue}[rng.IntN(2)],
		}
	}
	// A podSelector leaving some of the zoo's workloads alone (their pods' app label), by In or
	// NotIn; overlapping maintenances then drain different pods of one node.
	if rng.IntN(100) < 30 {
		var apps []string
		for len(apps) == 0 {
			for _, a := range zooApps {
				if rng.IntN(100) < 40 {
					apps = append(apps, a)
				}
			}
		}
		op := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn}[rng.IntN(2)]
		spec.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: op, Values: apps}}}
	}
	// A grace period shorter than the pods' own (30s), or longer.
	if rng.IntN(100) < 30 {
		spec.EvictionGracePeriodSeconds = ptr.To([]int64{1, 2, 5, 45}[rng.IntN(4)])
	}
	if rng.IntN(100) < 30 {
		spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyIgnore
	}
	return spec
}

// zooApps are the app labels of the zoo's pods, which podSelectors draw from.
var zooApps = []string{"surge", "nosurge", "single", "hpa", "locked", "crowded", "localstorage", "db", "bare-0", "bare-1",
	"batch", "skip", "finishing", "ruleskip", "rulelate"}

// object returns the maintenance as it is created.
func (d drawnMaintenance) object() *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: d.name}, Spec: *d.spec.DeepCopy()}
}

// String says what the scenario is, for a failure's message.
func (sc scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lane %d on %s with %s", sc.lane, strings.Join(sc.nodes, ","), strings.Join(kindNames(sc.workloads), ","))
	for i, nm := range sc.nms {
		fmt.Fprintf(&b, "; %s at %v: %s", nm.name, nm.createAt.Round(time.Second), describe(nm.spec))
		for _, e := range sc.edits {
			if e.nm == i {
				fmt.Fprintf(&b, ", %s at %v", e.what, e.at.Round(time.Second))
			}
		}
	}
	if sc.machine != nil {
		fmt.Fprintf(&b, "; %s", sc.machine)
	}
	return b.String()
}

// describe says a spec in one line.
func describe(spec nodemaintv1alpha1.NodeMaintenanceSpec) string {
	parts := []string{"nodes " + strings.Join(spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values, ",")}
	if spec.Cordon {
		parts = append(parts, "cordon")
	}
	if spec.Drain {
		parts = append(parts, "drain")
	}
	parts = append(parts, string(spec.EvictionPolicy), "response "+spec.EvacuationResponseTimeout.Duration.String())
	if spec.DrainTimeout != nil {
		parts = append(parts, "drainTimeout "+spec.DrainTimeout.Duration.String())
	}
	parts = append(parts, string(spec.DrainTimeoutAction), string(spec.DrainLabelPolicy))
	if r := spec.Rollout; r != nil {
		parts = append(parts, fmt.Sprintf("rollout %s %s %s", r.MaxUnavailable.String(), r.Release, r.OnNodeFailure))
		if r.HaltOnAlerts != nil {
			parts = append(parts, "haltOnAlerts "+strings.Join(r.HaltOnAlerts.AlertNames, ","))
		}
	}
	if ps := spec.PodSelector; ps != nil {
		r := ps.MatchExpressions[0]
		parts = append(parts, fmt.Sprintf("podSelector app %s %s", r.Operator, strings.Join(r.Values, ",")))
	}
	if g := spec.EvictionGracePeriodSeconds; g != nil {
		parts = append(parts, fmt.Sprintf("grace %ds", *g))
	}
	if spec.Autoscalers != "" {
		parts = append(parts, "autoscalers "+string(spec.Autoscalers))
	}
	return strings.Join(parts, " ")
}
