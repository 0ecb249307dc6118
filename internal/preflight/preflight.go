package preflight

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// Run checks the drain of the input's targets. It does not change the input.
func Run(in Input) Report {
	nodes := map[string]*corev1.Node{}
	for i := range in.Nodes {
		nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	var report Report
	targets := []string{}
	seen := map[string]bool{}
	for _, name := range in.Targets {
		switch {
		case seen[name]:
		case nodes[name] == nil:
			report.Missing = append(report.Missing, name)
		default:
			targets = append(targets, name)
		}
		seen[name] = true
	}
	sort.Strings(targets)
	sort.Strings(report.Missing)

	podsByNode := map[string][]*corev1.Pod{}
	for i := range in.Pods {
		pod := &in.Pods[i]
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		podsByNode[pod.Spec.NodeName] = append(podsByNode[pod.Spec.NodeName], pod)
	}
	for _, pods := range podsByNode {
		sort.Slice(pods, func(i, j int) bool { return podKey(pods[i]) < podKey(pods[j]) })
	}

	rules := drain.NewRules(in.DrainRules).IgnoringDrainLabel(in.IgnoreDrainLabel)
	plans := map[string]drain.Plan{}
	for _, name := range targets {
		node := nodes[name]
		var classified []drain.Classified
		for _, pod := range podsByNode[name] {
			if maintenance.Targeted(pod) {
				classified = append(classified, drain.Classified{Pod: pod, Class: rules.Classify(pod, in.NamespaceLabels[pod.Namespace], node.Labels)})
			}
		}
		plans[name] = drain.NewPlan(classified)
	}

	p := newPlacer(&in, podsByNode)
	outAtOnce := len(targets)
	if in.MaxUnavailable > 0 && in.MaxUnavailable < len(targets) {
		outAtOnce = in.MaxUnavailable
	}
	rollout := outAtOnce < len(targets)
	report.OutAtOnce = outAtOnce
	report.Assumption = assumption(len(targets), outAtOnce)
	// The fullest targets first: those whose pods need the most room elsewhere.
	fullest := append([]string(nil), targets...)
	sort.SliceStable(fullest, func(i, j int) bool {
		return p.nodes[p.index[fullest[i]]].fullness() > p.nodes[p.index[fullest[j]]].fullness()
	})

	ws := newWorkloads(&in)
	bs := newBudgets(in.PodDisruptionBudgets)
	outcomes := map[string]*outcome{} // by set of nodes out at once
	for _, name := range targets {
		out := []string{name}
		for _, other := range fullest {
			if len(out) == outAtOnce {
				break
			}
			if other != name {
				out = append(out, other)
			}
		}
		sort.Strings(out)
		key := strings.Join(out, ",")
		oc, ok := outcomes[key]
		if !ok {
			oc = &outcome{liveOut: map[*workload]int{}}
			outSet := map[string]bool{}
			var pods []displaced
			for _, n := range out {
				outSet[n] = true
				for _, c := range moved(plans[n]) {
					if c.Pod.DeletionTimestamp != nil || drain.Unanswerable(c.Pod) {
						continue
					}
					pods = append(pods, displaced{pod: c.Pod, want: requests(c.Pod)})
					oc.liveOut[ws.of(c.Pod)]++
				}
			}
			oc.unplaced = p.place(outSet, pods)
			outcomes[key] = oc
		}
		nr := NodeReport{Name: name}
		if rollout {
			for _, n := range out {
				if n != name {
					nr.OutWith = append(nr.OutWith, n)
				}
			}
		}
		check(&nr, plans[name], oc, ws, bs, rollout)
		report.Nodes = append(report.Nodes, nr)
	}
	return report
}

// moved are the pods the drain moves off the node: those of every order group.
func moved(plan drain.Plan) []drain.Classified {
	return append(append([]drain.Classified(nil), plan.Current...), plan.Later...)
}

// assumption says which targets are assumed out at once.
func assumption(targets, outAtOnce int) string {
	switch {
	case targets == 0:
		return "no node to check"
	case outAtOnce == targets && targets == 1:
		return "the node is out (cordoned and drained); every other node stays as it is"
	case outAtOnce == targets:
		return fmt.Sprintf("all %d nodes are out at once (cordoned and drained), as a maintenance without a rollout takes them", targets)
	case outAtOnce == 1:
		return fmt.Sprintf("1 of the %d nodes is out at a time (max unavailable 1): each node is checked alone, the other nodes stay schedulable", targets)
	}
	return fmt.Sprintf("%d of the %d nodes are out at once (max unavailable %d): each node is checked with the %d fullest other %s (by requested CPU and memory) out with it, the worst case for the room left; the other nodes stay schedulable",
		outAtOnce, targets, outAtOnce, outAtOnce-1, plural(outAtOnce-1, "node", "nodes"))
}

// outcome is what taking a set of nodes out at once does to the pods they displace.
type outcome struct {
	// unplaced says why each pod whose replacement fits nowhere does not, by UID.
	unplaced map[types.UID]string
	// liveOut counts, per workload, its pods the set of nodes displaces.
	liveOut map[*workload]int
}

// check fills the node's report from its drain plan, what taking it out with the others does
// to their pods, the workloads and the budgets.
func check(nr *NodeReport, plan drain.Plan, oc *outcome, ws *workloads, bs budgets, rollout bool) {
	f := findings{}
	for _, c := range plan.Held {
		f.add(Blocks, ReasonInvalidDrainRule, c.Class.Source, "held until the DrainRule is fixed or deleted: "+c.Class.InvalidRule, c.Pod)
	}
	for _, c := range plan.Skipped {
		f.add(Info, ReasonSkipped, c.Class.Source, "skipped: stays on the node, running; the drain does not wait for it", c.Pod)
	}
	for _, c := range plan.WaitCompleted {
		f.add(Info, ReasonWaitCompleted, c.Class.Source, "the drain waits for the pod to complete and never evicts it", c.Pod)
	}
	for _, c := range moved(plan) {
		pod := c.Pod
		if pod.DeletionTimestamp != nil {
			f.add(Info, ReasonTerminating, "", "already terminating: the drain waits for it to go", pod)
			continue
		}
		covering := bs.of(pod)
		why, noRoom := oc.unplaced[pod.UID]
		w := ws.of(pod)
		evicted := true
		switch {
		case w == nil:
			f.add(Loses, ReasonBarePod, "", "bare pod (no controller): evicted once the response timeout runs out, unless someone accepts the evacuation request, and never recreated", pod)
		case w.surges && !noRoom:
			evicted = false
			msg := "surges: a replacement starts on another node before the pod goes, so the Deployment does not go down"
			if len(covering) == 1 && covering[0].pdb.Status.DisruptionsAllowed <= 0 {
				msg += fmt.Sprintf(" (its PodDisruptionBudget %s allows no disruption now, which a surge does not need)", covering[0])
			}
			f.add(Info, ReasonSurge, w.String(), msg, pod)
		case w.surges:
			f.add(Info, ReasonNoSurge, w.String(), "tries to surge, but its replacement fits on no other node: once the Deployment responder's surge timeout runs out it gives up and the pod is evicted; "+budgetNote(covering), pod)
		default:
			sev, msg := Info, w.noSurge+"; "+budgetNote(covering)
			if len(covering) == 0 && w.live > 0 && w.live <= oc.liveOut[w] {
				sev = Loses
				if w.live == 1 {
					msg += ": its only pod moves, it is down until its replacement is ready"
				} else {
					msg += fmt.Sprintf(": all its %d pods are on nodes out at once, it is down until a replacement is ready", w.live)
				}
			}
			f.add(sev, ReasonNoSurge, w.String(), msg, pod)
		}
		if noRoom {
			sev, msg := Loses, "fits on no other node ("+why+"): its replacement would stay Pending"
			if w != nil && w.surges {
				msg = "fits on no other node (" + why + "): its surge replacement, then its replacement, would stay Pending"
			}
			if rollout {
				sev, msg = Blocks, msg+"; a rollout halts (ReplacementsUnschedulable) while a replacement cannot be scheduled"
			}
			f.add(sev, ReasonNoRoom, "", msg, pod)
		}
		if evicted {
			switch {
			case len(covering) > 1:
				f.add(Blocks, ReasonMultipleBudgets, "PodDisruptionBudgets "+budgetNames(covering),
					"covered by more than one PodDisruptionBudget: the Eviction API refuses to evict it", pod)
			case len(covering) == 1 && covering[0].pdb.Status.DisruptionsAllowed <= 0 && !evictionIgnores(pod, covering[0]):
				st := covering[0].pdb.Status
				f.add(Blocks, ReasonPodDisruptionBudget, "PodDisruptionBudget "+covering[0].String(),
					fmt.Sprintf("allows no disruption now (%d healthy, %d desired): the pod is not evicted until it does", st.CurrentHealthy, st.DesiredHealthy), pod)
			}
		}
		if vols := emptyDirs(pod); len(vols) > 0 {
			f.add(Loses, ReasonEmptyDir, "", "emptyDir volumes: their data is deleted with the pod", pod)
		}
	}
	nr.Targeted = len(plan.Current) + len(plan.Later) + len(plan.WaitCompleted) + len(plan.Skipped) + len(plan.Held)
	nr.Moved = len(plan.Current) + len(plan.Later)
	nr.Skipped = len(plan.Skipped)
	nr.Findings = f.sorted()
	for _, fd := range nr.Findings {
		if fd.Severity.rank() > nr.Verdict.rank() {
			nr.Verdict = fd.Severity
		}
	}
}

func emptyDirs(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			out = append(out, v.Name)
		}
	}
	return out
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// findings groups what is found by severity, reason, object and message, with the pods.
type findings map[[4]string]*Finding

func (f findings) add(sev Severity, reason, object, message string, pod *corev1.Pod) {
	k := [4]string{string(sev), reason, object, message}
	fd, ok := f[k]
	if !ok {
		fd = &Finding{Severity: sev, Reason: reason, Object: object, Message: message}
		f[k] = fd
	}
	fd.Pods = append(fd.Pods, podKey(pod))
}

// sorted are the findings, the worst first, then by reason, object and message; each one's
// pods sorted.
func (f findings) sorted() []Finding {
	out := make([]Finding, 0, len(f))
	for _, fd := range f {
		sort.Strings(fd.Pods)
		out = append(out, *fd)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Severity != b.Severity:
			return a.Severity.rank() > b.Severity.rank()
		case a.Reason != b.Reason:
			return a.Reason < b.Reason
		case a.Object != b.Object:
			return a.Object < b.Object
		}
		return a.Message < b.Message
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
