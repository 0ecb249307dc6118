package combinations_test

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"testing"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestSeedReplaysTheDraw: a batch's seed draws it again, the same in every detail.
func TestSeedReplaysTheDraw(t *testing.T) {
	for seed := range uint64(20) {
		a, b := drawBatch(seed, longRun), drawBatch(seed, longRun)
		if !reflect.DeepEqual(describeBatch(a), describeBatch(b)) {
			t.Fatalf("seed %d drew two different batches", seed)
		}
	}
	if reflect.DeepEqual(describeBatch(drawBatch(1, longRun)), describeBatch(drawBatch(2, longRun))) {
		t.Fatal("seeds 1 and 2 drew the same batch")
	}
}

func describeBatch(b batch) []string {
	out := []string{b.protocol, string(b.topology)}
	for _, sc := range b.lanes {
		out = append(out, sc.String())
	}
	for _, k := range b.kills {
		out = append(out, k.String())
	}
	for _, a := range b.alerts {
		out = append(out, fmt.Sprintf("%v %s", a.at, a.what))
	}
	return out
}

// TestGeneratorCoversTheSpace: the batches of a long run draw every value of every dimension
// the issue names, and overlapping maintenances, so that a combination nobody thought of is
// drawn rather than left out.
func TestGeneratorCoversTheSpace(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(longRun.batches) {
		b := drawBatch(seed, longRun)
		seen["protocol "+b.protocol] = true
		seen["topology "+string(b.topology)+" protocol "+b.protocol] = true
		for _, a := range b.alerts {
			seen["alerts "+string(a.what)] = true
		}
		for _, sc := range b.lanes {
			if m := sc.machine; m != nil {
				seen["machine "+string(m.variant)] = true
				seen["machine "+string(m.topology)] = true
				seen["machine "+string(m.topology)+" "+string(m.variant)] = true
				seen["machine drainTimeout "+map[bool]string{true: "yes", false: "no"}[m.drainTimeout > 0]] = true
			}
			for _, k := range sc.workloads {
				seen["workload "+k.name] = true
			}
			for _, e := range sc.edits {
				seen["edit "+string(e.what)] = true
			}
			for i, nm := range sc.nms {
				s := nm.spec
				seen["policy "+string(s.EvictionPolicy)] = true
				seen["action "+string(s.DrainTimeoutAction)] = true
				seen["label "+string(s.DrainLabelPolicy)] = true
				seen["rollout "+map[bool]string{true: "yes", false: "no"}[s.Rollout != nil]] = true
				if s.Rollout != nil {
					seen["haltOnAlerts "+map[bool]string{true: "yes", false: "no"}[s.Rollout.HaltOnAlerts != nil]] = true
				}
				seen["drain "+map[bool]string{true: "yes", false: "no"}[s.Drain]] = true
				seen["podSelector "+map[bool]string{true: "yes", false: "no"}[s.PodSelector != nil]] = true
				if s.PodSelector != nil {
					seen["podSelector "+string(s.PodSelector.MatchExpressions[0].Operator)] = true
				}
				seen["grace "+map[bool]string{true: "yes", false: "no"}[s.EvictionGracePeriodSeconds != nil]] = true
				seen["autoscalers "+string(cmp.Or(s.Autoscalers, nodemaintv1alpha1.AutoscalerPolicyHold))] = true
				for _, other := range sc.nms[:i] {
					if overlap(s, other.spec) {
						seen["overlapping maintenances"] = true
					}
				}
			}
		}
	}
	want := []string{"protocol pod-conditions", "protocol eviction-request", "overlapping maintenances",
		"policy " + string(nodemaintv1alpha1.EvictionPolicySignalOnly), "policy " + string(nodemaintv1alpha1.EvictionPolicyEvict),
		"action " + string(nodemaintv1alpha1.DrainTimeoutActionDelete), "action " + string(nodemaintv1alpha1.DrainTimeoutActionReport),
		"label " + string(nodemaintv1alpha1.DrainLabelPolicyHonor), "label " + string(nodemaintv1alpha1.DrainLabelPolicyIgnore),
		"rollout yes", "rollout no", "drain yes", "drain no", "haltOnAlerts yes", "haltOnAlerts no",
		"podSelector yes", "podSelector no", "podSelector In", "podSelector NotIn", "grace yes", "grace no",
		"autoscalers Hold", "autoscalers Ignore"}
	for _, a := range alertChanges {
		want = append(want, "alerts "+string(a))
	}
	for _, v := range []machineVariant{machineOwn, machineForged, machineNoNode} {
		want = append(want, "machine "+string(v))
		for _, tp := range []topology{selfHosted, management} {
			want = append(want, "machine "+string(tp)+" "+string(v))
		}
	}
	want = append(want, "machine "+string(selfHosted), "machine "+string(management))
	for _, tp := range []topology{selfHosted, management} {
		for _, p := range protocols {
			want = append(want, "topology "+string(tp)+" protocol "+p)
		}
	}
	want = append(want, "machine drainTimeout yes", "machine drainTimeout no")
	for _, k := range zoo {
		want = append(want, "workload "+k.name)
	}
	for _, e := range []editKind{drainOn, drainOff, cordonOff, signalOnly, evict, remove} {
		want = append(want, "edit "+string(e))
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("%d batches of a long run never draw %s", longRun.batches, w)
		}
	}
}

func overlap(a, b nodemaintv1alpha1.NodeMaintenanceSpec) bool {
	for _, n := range a.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values {
		if slices.Contains(b.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values, n) {
			return true
		}
	}
	return false
}
