package drainpreflight

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/drainpreflight/hostaffinity"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// Run checks the drain of the input's targets. It does not change the input.
func Run(in Input) Report {
	return NewSnapshot(in.Cluster()).Run(in.Spec())
}

// Snapshot is what every preflight of one cluster shares, computed once: the pods of each
// node, what each node has left, the workloads, the budgets and the DrainRules. Preflights of
// any targets run on it (Run), concurrently too: nothing changes it once made. It keeps
// pointers to the objects it was made of, and about a hundred bytes a pod and a node of its
// own.
type Snapshot struct {
	nodes map[string]*corev1.Node
	// podsByNode are the pods bound to each node and not finished, by namespace/name;
	// podsByNamespace the same pods by namespace.
	podsByNode      map[string][]*corev1.Pod
	podsByNamespace map[string][]*corev1.Pod
	rules           *drain.Rules
	namespaces      map[string]map[string]string
	placer          *placer
	workloads       *workloads
	budgets         budgets
}

// NewSnapshot computes what preflights of the cluster share. It does not change the cluster.
func NewSnapshot(c Cluster) *Snapshot {
	s := &Snapshot{nodes: make(map[string]*corev1.Node, len(c.Nodes)), podsByNode: map[string][]*corev1.Pod{}, podsByNamespace: map[string][]*corev1.Pod{},
		namespaces: c.NamespaceLabels}
	for _, n := range c.Nodes {
		s.nodes[n.Name] = n
	}
	for _, pod := range c.Pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		s.podsByNode[pod.Spec.NodeName] = append(s.podsByNode[pod.Spec.NodeName], pod)
		s.podsByNamespace[pod.Namespace] = append(s.podsByNamespace[pod.Namespace], pod)
	}
	for _, pods := range s.podsByNode {
		sort.Slice(pods, func(i, j int) bool { return podKeyLess(pods[i], pods[j]) })
	}
	rules := make([]nodemaintv1alpha1.DrainRule, len(c.DrainRules))
	for i, r := range c.DrainRules {
		rules[i] = *r
	}
	s.rules = drain.NewRules(rules)
	s.placer = newPlacer(&c, s.podsByNode)
	s.workloads = newWorkloads(&c)
	s.budgets = newBudgets(c.PodDisruptionBudgets)
	return s
}

// Run checks the drain of the spec's targets.
func (s *Snapshot) Run(spec Spec) Report {
	var report Report
	targets, missing := s.known(spec.Targets)
	report.Missing = missing
	plans := s.plans(targets, spec.IgnoreDrainLabel, spec.PodSelector)

	p := s.placer.start()
	outAtOnce := len(targets)
	if spec.MaxUnavailable > 0 && spec.MaxUnavailable < len(targets) {
		outAtOnce = spec.MaxUnavailable
	}
	rollout := outAtOnce < len(targets)
	report.OutAtOnce = outAtOnce
	report.Assumption = assumption(len(targets), outAtOnce)
	fullest := s.fullestFirst(targets)
	ws, bs := s.workloads, s.budgets
	// Each target is out with the outAtOnce-1 fullest others: with the first outAtOnce-1 of
	// fullest (top) when it is not one of them, else with the first outAtOnce but itself. So
	// the sets of nodes out at once are top and one target more, named by that target (extra).
	top, inTop := fullestOut(fullest, outAtOnce)
	extra := func(target string) string {
		if inTop[target] {
			return fullest[outAtOnce-1]
		}
		return target
	}
	outcomes := map[string]*outcome{} // by extra
	var sets []*outcome               // in the order of their first target
	checks := 0
	for _, name := range targets {
		if _, ok := outcomes[extra(name)]; ok {
			continue
		}
		out := append(append(make([]string, 0, outAtOnce), top...), extra(name))
		sort.Strings(out)
		oc := &outcome{out: out, liveOut: map[*workload]int{}}
		for _, n := range out {
			for _, c := range moved(plans[n]) {
				if c.Pod.DeletionTimestamp != nil || drain.Unanswerable(c.Pod) {
					continue
				}
				oc.pods = append(oc.pods, c.Pod)
				oc.liveOut[ws.of(c.Pod)]++
			}
		}
		outcomes[extra(name)] = oc
		sets = append(sets, oc)
		checks += len(oc.pods) * len(s.placer.nodes)
	}
	if spec.MaxChecks > 0 && checks > spec.MaxChecks {
		report.NotPlaced = fmt.Sprintf("where the replacements would go is not checked: %d %s of nodes out at once, %d pods displaced in all, against %d nodes is more than this preflight checks (%d pod-node pairs at most); nothing is reported NoRoom",
			len(sets), plural(len(sets), "set", "sets"), displacedIn(sets), len(s.placer.nodes), spec.MaxChecks)
	} else {
		for _, oc := range sets {
			oc.unplaced = p.place(oc.out, oc.pods)
		}
	}
	s.forecast(sets, plans, p)
	cp := controlPlane(s, targets, spec.MaxUnavailable > 0)
	for _, name := range targets {
		oc := outcomes[extra(name)]
		nr := NodeReport{Name: name}
		switch {
		case !rollout:
		case !inTop[name]:
			nr.OutWith = top // shared: read only
		default:
			for _, n := range oc.out {
				if n != name {
					nr.OutWith = append(nr.OutWith, n)
				}
			}
		}
		check(&nr, plans[name], oc, ws, bs, rollout, cp[name])
		report.Nodes = append(report.Nodes, nr)
	}
	report.Deadlocks = deadlocks(report.Nodes)
	return report
}

// known are the targets that name nodes of the cluster, once each, and the names that do not
// (missing), both sorted.
func (s *Snapshot) known(names []string) (targets, missing []string) {
	targets = []string{}
	seen := map[string]bool{}
	for _, name := range names {
		switch {
		case seen[name]:
		case s.nodes[name] == nil:
			missing = append(missing, name)
		default:
			targets = append(targets, name)
		}
		seen[name] = true
	}
	sort.Strings(targets)
	sort.Strings(missing)
	return targets, missing
}

// plans classifies the targeted pods of each target by the DrainRules, as the drain does: a pod
// the podSelector (nil: every pod) does not select is skipped (drain.NotSelected).
func (s *Snapshot) plans(targets []string, ignoreDrainLabel bool, podSelector labels.Selector) map[string]drain.Plan {
	rules := s.rules.IgnoringDrainLabel(ignoreDrainLabel)
	plans := map[string]drain.Plan{}
	for _, name := range targets {
		node := s.nodes[name]
		var classified []drain.Classified
		for _, pod := range s.podsByNode[name] {
			if !maintenance.Targeted(pod) {
				continue
			}
			class := drain.NotSelected()
			if podSelector == nil || podSelector.Matches(labels.Set(pod.Labels)) {
				class = rules.Classify(pod, s.namespaces[pod.Namespace], node.Labels)
			}
			classified = append(classified, drain.Classified{Pod: pod, Class: class})
		}
		plans[name] = drain.NewPlan(classified)
	}
	return plans
}

// fullestFirst orders the targets fullest first: those whose pods need the most room elsewhere.
func (s *Snapshot) fullestFirst(targets []string) []string {
	fullest := append([]string(nil), targets...)
	sort.SliceStable(fullest, func(i, j int) bool {
		return s.placer.fullness(s.placer.index[fullest[i]]) > s.placer.fullness(s.placer.index[fullest[j]])
	})
	return fullest
}

// fullestOut are the outAtOnce-1 fullest targets (top, sorted), out with every other target.
func fullestOut(fullest []string, outAtOnce int) (top []string, inTop map[string]bool) {
	inTop = map[string]bool{}
	if outAtOnce > 0 {
		top = append(top, fullest[:outAtOnce-1]...)
		for _, n := range top {
			inTop[n] = true
		}
		sort.Strings(top)
	}
	return top, inTop
}

func displacedIn(sets []*outcome) int {
	n := 0
	for _, oc := range sets {
		n += len(oc.pods)
	}
	return n
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
	// out are the nodes, pods the pods they displace whose replacements need a node.
	out  []string
	pods []*corev1.Pod
	// unplaced says why each pod whose replacement fits nowhere does not, by UID.
	unplaced map[types.UID]string
	// liveOut counts, per workload, its pods the set of nodes displaces.
	liveOut map[*workload]int
	// take counts, per budget, its pods the set of nodes displaces that the drain evicts under
	// it (healthy, and under no other budget).
	take map[*policyv1.PodDisruptionBudget]int
	// surgeFails says why the surge of a single-pod Deployment's pod finds no node (its
	// required anti-affinity), by UID.
	surgeFails map[types.UID]string
}

// forecast fills what the deadlock forecast needs of each set of nodes out at once, once their
// pods are placed: the single-pod Deployments whose surge finds no node for their
// anti-affinity, and how many of each budget's pods the drain evicts.
func (s *Snapshot) forecast(sets []*outcome, plans map[string]drain.Plan, p *placement) {
	holders := hostaffinity.New(s.podsByNamespace, p.index, len(p.nodes))
	for _, oc := range sets {
		s.forecastSet(oc, plans, p, holders)
	}
}

func (s *Snapshot) forecastSet(oc *outcome, plans map[string]drain.Plan, p *placement, holders *hostaffinity.Holders) {
	oc.take, oc.surgeFails = map[*policyv1.PodDisruptionBudget]int{}, map[types.UID]string{}
	for _, n := range oc.out {
		for _, c := range moved(plans[n]) {
			pod := c.Pod
			if pod.DeletionTimestamp != nil {
				continue
			}
			w := s.workloads.of(pod)
			if w != nil && w.surges && w.live == 1 && hostaffinity.Repels(pod) {
				candidates := slices.Clone(p.allowedBy(p.constraintsOf(pod)))
				for _, o := range oc.out {
					i := p.index[o]
					candidates[i/64] &^= 1 << (i % 64)
				}
				if holders.NoRoom(pod, candidates) {
					oc.surgeFails[pod.UID] = "its required anti-affinity on " + corev1.LabelHostname + " leaves no node: every other node it may run on already holds a pod it repels"
				}
			}
			_, noRoom := oc.unplaced[pod.UID]
			if !evicts(w, noRoom, oc.surgeFails[pod.UID]) {
				continue
			}
			if covering := s.budgets.of(pod); len(covering) == 1 && !evictionIgnores(pod, covering[0]) {
				oc.take[covering[0].pdb]++
			}
		}
	}
}

// evicts reports whether the drain evicts a pod of the workload (nil: bare) rather than its
// Deployment surging it: noRoom, its replacement fits on no node; surgeFails, why its surge
// finds no node ("": it does).
func evicts(w *workload, noRoom bool, surgeFails string) bool {
	return w == nil || !w.surges || noRoom || surgeFails != ""
}

// controlPlane is the ControlPlaneTogether finding of each control-plane target (label
// node-role.kubernetes.io/control-plane) when several of them are out at once: without a
// rollout (all targets out together), which the controller refuses (EtcdQuorumAtRisk). A rollout
// takes control-plane nodes one at a time whatever its maxUnavailable: empty then.
func controlPlane(s *Snapshot, targets []string, rolling bool) map[string]*Finding {
	var cp []string
	for _, name := range targets {
		if rollout.ControlPlane(s.nodes[name]) {
			cp = append(cp, name)
		}
	}
	out := map[string]*Finding{}
	if len(cp) < 2 || rolling {
		return out
	}
	f := &Finding{Severity: Blocks, Reason: ReasonControlPlaneTogether, Object: "nodes " + few.Names(cp, 3),
		Message: fmt.Sprintf("%d control-plane nodes are out at once: draining them together can break etcd quorum (the controller refuses it, EtcdQuorumAtRisk); take them in a rollout, which takes one at a time, or a maintenance each", len(cp))}
	for _, name := range cp {
		out[name] = f // shared: read only
	}
	return out
}

// check fills the node's report from its drain plan, what taking it out with the others does
// to their pods, the workloads and the budgets; cp is its ControlPlaneTogether finding (nil:
// none).
func check(nr *NodeReport, plan drain.Plan, oc *outcome, ws *workloads, bs budgets, rollout bool, cp *Finding) {
	f := findings{}
	if cp != nil {
		f.addNodes(*cp)
	}
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
		checkMoved(f, c.Pod, oc, ws, bs, rollout)
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

// checkMoved adds the findings of a pod the drain moves off the node: whether it surges or is
// evicted, under which budgets, whether its replacement fits, what is lost with it.
func checkMoved(f findings, pod *corev1.Pod, oc *outcome, ws *workloads, bs budgets, rollout bool) {
	if pod.DeletionTimestamp != nil {
		f.add(Info, ReasonTerminating, "", "already terminating: the drain waits for it to go", pod)
		return
	}
	covering := bs.of(pod)
	why, noRoom := oc.unplaced[pod.UID]
	w := ws.of(pod)
	surgeFails := oc.surgeFails[pod.UID]
	// blocked: the Eviction API refuses to evict the pod now, for its budget.
	blocked := len(covering) == 1 && covering[0].pdb.Status.DisruptionsAllowed <= 0 && !evictionIgnores(pod, covering[0])
	switch {
	case w == nil:
		f.add(Loses, ReasonBarePod, "", "bare pod (no controller): evicted once the response timeout runs out, unless someone accepts the evacuation request, and never recreated", pod)
	case w.surges && !noRoom && surgeFails == "":
		msg := "surges: a replacement starts on another node before the pod goes, so the Deployment does not go down"
		if len(covering) == 1 && covering[0].pdb.Status.DisruptionsAllowed <= 0 {
			msg += fmt.Sprintf(" (its PodDisruptionBudget %s allows no disruption now, which a surge does not need)", covering[0])
		}
		f.add(Info, ReasonSurge, w.String(), msg, pod)
	case w.surges && surgeFails != "":
		cannotSurge(f, w, pod, "its Deployment would surge it, but "+surgeFails, covering, blocked)
	case w.surges && w.live == 1:
		cannotSurge(f, w, pod, "its Deployment would surge it, but its replacement fits on no other node", covering, blocked)
	case w.surges:
		f.add(Info, ReasonNoSurge, w.String(), "tries to surge, but its replacement fits on no other node: once the Deployment responder's surge timeout runs out it gives up and the pod is evicted; "+budgetNote(covering), pod)
	case w.live == 1:
		cannotSurge(f, w, pod, w.noSurge, covering, blocked)
	default:
		sev, msg := Info, w.noSurge+"; "+budgetNote(covering)
		if len(covering) == 0 && w.live > 0 && w.live <= oc.liveOut[w] {
			sev = Loses
			msg += fmt.Sprintf(": all its %d pods are on nodes out at once, it is down until a replacement is ready", w.live)
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
	if evicts(w, noRoom, surgeFails) {
		switch {
		case len(covering) > 1:
			f.add(Blocks, ReasonMultipleBudgets, "PodDisruptionBudgets "+budgetNames(covering),
				"covered by more than one PodDisruptionBudget: the Eviction API refuses to evict it", pod)
		case blocked:
			f.add(Blocks, ReasonBudgetBlocked, "PodDisruptionBudget "+covering[0].String(), budgetBlocked(covering[0])+": the pod is not evicted until it does, and the drain waits", pod)
		case len(covering) == 1 && !evictionIgnores(pod, covering[0]) && oc.take[covering[0].pdb] > int(covering[0].pdb.Status.DisruptionsAllowed):
			take, allowed := oc.take[covering[0].pdb], int(covering[0].pdb.Status.DisruptionsAllowed)
			f.add(Blocks, ReasonBudgetExceededByTurn, "PodDisruptionBudget "+covering[0].String(), fmt.Sprintf(
				"the %d %s out at once (%s) hold %d of its pods that the drain evicts, and it allows %d %s now: the drain waits on it for the pods past that until replacements are healthy elsewhere, and deadlocks if they cannot be",
				len(oc.out), plural(len(oc.out), "node", "nodes"), few.Names(oc.out, 3), take, allowed, plural(allowed, "disruption", "disruptions")), pod)
		}
	}
	if vols := emptyDirs(pod); len(vols) > 0 {
		f.add(Loses, ReasonEmptyDir, "", "emptyDir volumes: their data is deleted with the pod", pod)
	}
}

// cannotSurge reports the only live pod of a workload that nothing surges (why): it blocks when
// its budgets forbid its eviction (blocked, or several budgets), else it is lost for a while.
func cannotSurge(f findings, w *workload, pod *corev1.Pod, why string, covering []budget, blocked bool) {
	msg := "its only live pod moves and nothing surges it: " + why
	switch {
	case blocked:
		f.add(Blocks, ReasonCannotSurge, w.String(), msg+fmt.Sprintf("; its PodDisruptionBudget %s allows no disruption: the pod is never evicted, the drain waits until the budget or the workload changes", covering[0]), pod)
	case len(covering) > 1:
		f.add(Blocks, ReasonCannotSurge, w.String(), msg+"; it is under several PodDisruptionBudgets, which the Eviction API refuses", pod)
	default:
		f.add(Loses, ReasonCannotSurge, w.String(), msg+": it is down until its replacement is ready; "+budgetNote(covering), pod)
	}
}

// budgetBlocked says why a budget allows no disruption now: it never does (maxUnavailable 0,
// minAvailable as many as its pods), or its pods are not healthy enough.
func budgetBlocked(b budget) string {
	spec, st := b.pdb.Spec, b.pdb.Status
	if mu := spec.MaxUnavailable; mu != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(mu, int(st.ExpectedPods), true); err == nil && n <= 0 {
			return fmt.Sprintf("maxUnavailable %s: it never allows a disruption", mu.String())
		}
	}
	if ma := spec.MinAvailable; ma != nil && st.ExpectedPods > 0 && st.DesiredHealthy >= st.ExpectedPods {
		return fmt.Sprintf("minAvailable %s is all of its %d %s: it never allows a disruption", ma.String(), st.ExpectedPods, plural(int(st.ExpectedPods), "pod", "pods"))
	}
	if st.CurrentHealthy < st.DesiredHealthy || st.CurrentHealthy < st.ExpectedPods {
		return fmt.Sprintf("%d of its %d pods are healthy and %d must be: it allows no disruption until more are healthy", st.CurrentHealthy, max(st.ExpectedPods, st.CurrentHealthy), st.DesiredHealthy)
	}
	return fmt.Sprintf("allows no disruption now (%d healthy, %d desired)", st.CurrentHealthy, st.DesiredHealthy)
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

// podKeyLess reports whether podKey(a) < podKey(b), without making the keys.
func podKeyLess(a, b *corev1.Pod) bool {
	at := func(p *corev1.Pod, i int) (byte, bool) {
		switch {
		case i < len(p.Namespace):
			return p.Namespace[i], true
		case i == len(p.Namespace):
			return '/', true
		case i-len(p.Namespace)-1 < len(p.Name):
			return p.Name[i-len(p.Namespace)-1], true
		}
		return 0, false
	}
	for i := 0; ; i++ {
		x, okA := at(a, i)
		y, okB := at(b, i)
		switch {
		case !okA || !okB:
			return !okA && okB
		case x != y:
			return x < y
		}
	}
}

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

// addNodes adds a finding about nodes, of no pod.
func (f findings) addNodes(fd Finding) {
	k := [4]string{string(fd.Severity), fd.Reason, fd.Object, fd.Message}
	if _, ok := f[k]; !ok {
		f[k] = &fd
	}
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
