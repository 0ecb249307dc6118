package invariants

import (
	"fmt"
	"maps"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A watch gap (an API server restart, an expired resource version) hides what happened between
// the last event before it and the relist after it, and the relist delivers the objects in no
// particular order. So while a gap is open the checker keeps applying events to its state but
// reports nothing from them; once the relists are delivered it reconstructs, from what the
// objects carry, every pod's comings and goings inside the gap and replays them in the order
// they happened:
//
//   - a pod that was healthy and now carries a deletionTimestamp left when its deletion was
//     requested: deletionTimestamp minus deletionGracePeriodSeconds, or its DisruptionTarget
//     condition's lastTransitionTime (an eviction) when earlier;
//   - a pod whose UID changed (a StatefulSet's pod of the same name) is two: the first gone,
//     the second come;
//   - a pod that was not healthy (or not there) and now is became healthy at its Ready
//     condition's lastTransitionTime;
//   - a pod that was healthy and now is not Ready, without being deleted, went down
//     involuntarily at that lastTransitionTime: it counts no more, but is no disruption;
//   - a pod that was healthy and is gone altogether left at an unknown moment inside the gap,
//     so at the worst one: the gap's start. Options.Witness makes this impossible for the pods it
//     witnessed: their deletion waits for the checker (see witness.go).
//
// Every voluntary leave of the replay is checked against the budgets and surge-capable
// Deployments that were armed before the gap, with the pods counted at that moment: no
// "still violated later" grace, a breach that healed inside the gap is found. The API server's
// timestamps have a resolution of one second, so events in the same second are replayed joins
// first, then involuntary downs, then leaves: a breach that starts and heals within the same
// second inside a gap is not seen. Nor is the leaving of a pod that was created and deleted
// entirely inside a gap (no witness finalizer yet): it never counts as healthy, so the replay
// is stricter, not laxer, for every other pod's leaving.

// gap is a watch gap being delivered: the state as it was when it opened.
type gap struct {
	// start is when the checker last applied an event before the gap.
	start time.Time
	// pods, replicaSets are the state's maps at the gap's start (the objects are never
	// modified, so a shallow copy is a snapshot).
	pods        map[string]*corev1.Pod
	replicaSets map[string]*appsv1.ReplicaSet
	// armedBudgets, armedDeployments are the keys armed at the gap's start.
	armedBudgets, armedDeployments map[string]bool
}

// openGap starts a gap, unless one is open: the state as it is now is what the gap is compared
// with.
func (s *state) openGap() {
	if s.gap != nil {
		return
	}
	g := &gap{
		start:            s.lastEvent,
		pods:             maps.Clone(s.pods),
		replicaSets:      maps.Clone(s.replicaSets),
		armedBudgets:     map[string]bool{},
		armedDeployments: map[string]bool{},
	}
	for k, b := range s.pdbs {
		if b.armed {
			g.armedBudgets[k] = true
		}
	}
	for k, d := range s.deployments {
		if d.armed {
			g.armedDeployments[k] = true
		}
	}
	s.gap = g
}

// closeGap replays the gap from what the objects now carry, records the violations it finds,
// and goes back to checking every event as it comes.
func (s *state) closeGap() {
	g := s.gap
	if g == nil {
		return
	}
	s.gap = nil
	for k, pod := range s.pods {
		if len(podSteps(k, g.pods[k], pod, g.start)) > 0 {
			s.gapChanges++
		}
	}
	for k, pod := range g.pods {
		if s.pods[k] == nil && len(podSteps(k, pod, nil, g.start)) > 0 {
			s.gapChanges++
		}
	}
	for _, k := range sortedKeys(g.armedBudgets) {
		b := s.pdbs[k]
		if b == nil {
			continue // deleted during the gap
		}
		_, want, ok := s.budgetCounts(b)
		if !ok {
			continue
		}
		member := func(pod *corev1.Pod) bool {
			return pod.Namespace == b.pdb.Namespace && selectorMatches(b.selector, pod.Labels)
		}
		s.replay(g, KindPodDisruptionBudget, k, want, member)
	}
	for _, k := range sortedKeys(g.armedDeployments) {
		d := s.deployments[k]
		if d == nil || !s.keepsReplicas(d) {
			continue
		}
		member := func(pod *corev1.Pod) bool {
			return pod.Namespace == d.d.Namespace && s.deploymentOfIn(pod, g.replicaSets) == k
		}
		s.replay(g, KindDeploymentReady, k, s.userReplicas(d.d), member)
	}
}

// Kinds of step in a replay, in the order steps of the same second are replayed.
const (
	stepJoin = iota
	stepDown
	stepLeave
)

// step is one pod's change inside a gap.
type step struct {
	at   time.Time
	kind int
	pod  string
	// evidence says what the time was read from.
	evidence string
}

// replay reconstructs the healthy pods of one budget or Deployment through the gap, and
// records a violation at every voluntary leave that left fewer than want.
func (s *state) replay(g *gap, kind, object string, want int32, member func(*corev1.Pod) bool) {
	var healthyPods int32
	var steps []step
	seen := map[string]bool{}
	consider := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		before, after := g.pods[k], s.pods[k]
		if (before == nil || !member(before)) && (after == nil || !member(after)) {
			return
		}
		if healthy(before) {
			healthyPods++
		}
		if before != nil && after != nil && before.UID != after.UID {
			// Another pod of the same name (a StatefulSet's): the first one is gone.
			steps = append(steps, podSteps(k, before, nil, g.start)...)
			before = nil
		}
		steps = append(steps, podSteps(k, before, after, g.start)...)
	}
	for k := range g.pods {
		consider(k)
	}
	for k := range s.pods {
		consider(k)
	}
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i], steps[j]
		if sa, sb := a.at.Truncate(time.Second), b.at.Truncate(time.Second); !sa.Equal(sb) {
			return sa.Before(sb)
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return a.pod < b.pod
	})
	for _, st := range steps {
		switch st.kind {
		case stepJoin:
			healthyPods++
		case stepDown:
			healthyPods--
		case stepLeave:
			healthyPods--
			if healthyPods < want {
				s.record(Violation{
					Time: st.at, Kind: kind, Object: object, Pod: st.pod, Healthy: healthyPods, Want: want,
					AfterWatchGap: true, Evidence: st.evidence,
				})
			}
		}
	}
}

// podSteps returns what a pod did inside a gap that started at start, given the pod before it
// (nil: not there) and after it (nil: gone).
func podSteps(k string, before, after *corev1.Pod, start time.Time) []step {
	wasHealthy := healthy(before)
	at := func(t time.Time) time.Time {
		if t.Before(start) {
			// An event that was queued when the gap opened: it happened at its start at the
			// latest.
			return start
		}
		return t
	}
	switch {
	case after == nil:
		if wasHealthy {
			return []step{{at: start, kind: stepLeave, pod: k, evidence: "gone without a trace: assumed to have left when the gap started"}}
		}
	case after.DeletionTimestamp != nil:
		if before != nil && before.DeletionTimestamp != nil {
			return nil // left before the gap
		}
		requested := after.DeletionTimestamp.Add(-time.Duration(deref(after.DeletionGracePeriodSeconds)) * time.Second)
		evidence := fmt.Sprintf("deletion requested at %s (deletionTimestamp %s, grace %ds)",
			requested.UTC().Format(time.RFC3339), after.DeletionTimestamp.UTC().Format(time.RFC3339), deref(after.DeletionGracePeriodSeconds))
		// A second deletion with a shorter grace period moves deletionTimestamp earlier but
		// not before the first request; an eviction's DisruptionTarget condition dates it.
		for _, c := range after.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.LastTransitionTime.Before(&metav1.Time{Time: requested}) {
				requested = c.LastTransitionTime.Time
				evidence = fmt.Sprintf("%s since %s (%s)", c.Type, requested.UTC().Format(time.RFC3339), c.Reason)
			}
		}
		if wasHealthy {
			return []step{{at: at(requested), kind: stepLeave, pod: k, evidence: evidence}}
		}
		// Not healthy before the gap: it counts only if it became Ready before its deletion and
		// still says so.
		if ready := readyCondition(after); ready != nil && ready.Status == corev1.ConditionTrue && !ready.LastTransitionTime.After(requested) {
			return []step{
				{at: at(ready.LastTransitionTime.Time), kind: stepJoin, pod: k, evidence: "Ready since " + ready.LastTransitionTime.UTC().Format(time.RFC3339)},
				{at: at(requested), kind: stepLeave, pod: k, evidence: evidence},
			}
		}
	default:
		isHealthy := healthy(after)
		ready := readyCondition(after)
		switch {
		case !wasHealthy && isHealthy:
			return []step{{at: at(ready.LastTransitionTime.Time), kind: stepJoin, pod: k, evidence: "Ready since " + ready.LastTransitionTime.UTC().Format(time.RFC3339)}}
		case wasHealthy && !isHealthy:
			t := start
			if ready != nil {
				t = at(ready.LastTransitionTime.Time)
			}
			return []step{{at: t, kind: stepDown, pod: k, evidence: "not Ready since " + t.UTC().Format(time.RFC3339)}}
		}
	}
	return nil
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// deploymentOfIn is deploymentOf with the ReplicaSets of the state, or else of before (a pod
// gone with its ReplicaSet).
func (s *state) deploymentOfIn(pod *corev1.Pod, before map[string]*appsv1.ReplicaSet) string {
	if k := s.deploymentOf(pod); k != "" {
		return k
	}
	saved := s.replicaSets
	s.replicaSets = before
	defer func() { s.replicaSets = saved }()
	return s.deploymentOf(pod)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
