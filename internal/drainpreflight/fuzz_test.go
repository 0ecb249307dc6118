package drainpreflight

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/nodemaint/nodemaint/internal/testutil"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// FuzzRun builds small clusters from the fuzzer's bytes and checks the report against plain
// re-statements of what it promises, not merely that nothing panics:
//   - the same cluster listed in another order gives the same report, and so does a snapshot
//     of it that served other preflights before;
//   - every finding names pods of its node that the drain targets, the verdict is the worst
//     severity, and the counts add up;
//   - a pod whose replacement alone fits on no node left (its node selector, the taints it
//     does not tolerate, cordons, its CPU against what is free before anything moves) is
//     reported NoRoom, and a NoRoom finding blocks exactly when the targets are out in turns;
//   - a pod evicted under one budget that allows nothing (Ready, Running) blocks; a pod whose
//     Deployment surges never does, nor is reported lost as bare;
//   - a bare pod that the drain moves is reported lost;
//   - the deadlock forecast: control-plane targets are reported ControlPlaneTogether exactly
//     when several of them are out at once without a rollout (a rollout takes them one at a
//     time); the only live pod of a workload that does not
//     surge is reported CannotSurge; with every target out at once, a pod evicted under a budget
//     that allows fewer disruptions than the targets hold of its evicted pods is reported
//     BudgetExceededByTurn, and such a finding never names a budget that allows none or more;
//     a single-pod Deployment whose hostname anti-affinity leaves no node is never said to surge.
//
// Run it with
//
//	go test ./internal/drainpreflight -run '^$' -fuzz '^FuzzRun$' -fuzztime 30s
func FuzzRun(f *testing.F) {
	f.Add([]byte{3, 2, 0, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte{5, 1, 2, 9, 0xff, 0x10, 0x22, 0x35, 0x47, 0x51, 0x63, 0x7e, 0x81, 0x90, 0xa3, 0xb7, 0xc1, 0xd3, 0xe5, 0xf7, 0x02, 0x14, 0x26, 0x38, 0x4a, 0x5c, 0x6e})
	f.Add([]byte{1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{FuzzBytes: testutil.FuzzBytes{Data: data}}
		in := g.input()
		r := Run(in)

		// Another order, the same report.
		shuffled := in
		rng := rand.New(rand.NewSource(int64(len(data))))
		shuffled.Nodes = slices.Clone(in.Nodes)
		shuffled.Pods = slices.Clone(in.Pods)
		shuffled.PodDisruptionBudgets = slices.Clone(in.PodDisruptionBudgets)
		shuffled.Targets = slices.Clone(in.Targets)
		rng.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
		rng.Shuffle(len(shuffled.Pods), func(i, j int) { shuffled.Pods[i], shuffled.Pods[j] = shuffled.Pods[j], shuffled.Pods[i] })
		rng.Shuffle(len(shuffled.Targets), func(i, j int) { shuffled.Targets[i], shuffled.Targets[j] = shuffled.Targets[j], shuffled.Targets[i] })
		rng.Shuffle(len(shuffled.PodDisruptionBudgets), func(i, j int) {
			shuffled.PodDisruptionBudgets[i], shuffled.PodDisruptionBudgets[j] = shuffled.PodDisruptionBudgets[j], shuffled.PodDisruptionBudgets[i]
		})
		if r2 := Run(shuffled); !reflect.DeepEqual(r, r2) {
			t.Fatalf("the report depends on the order of the input:\n%+v\n%+v", r, r2)
		}
		// A snapshot serves any number of preflights: one's report does not depend on
		// those run before it.
		s := NewSnapshot(in.Cluster())
		s.Run(Spec{Targets: in.Targets[len(in.Targets)-1:], MaxUnavailable: 1, IgnoreDrainLabel: true})
		s.Run(Spec{Targets: shuffled.Targets, MaxUnavailable: in.MaxUnavailable + 1})
		if r2 := s.Run(in.Spec()); !reflect.DeepEqual(r, r2) {
			t.Fatalf("the report depends on the preflights run before on the same snapshot:\n%+v\n%+v", r, r2)
		}

		if n := r.Deadlocks; n != countBlocking(r, nodemaintv1alpha1.DeadlockReason) {
			t.Errorf("Deadlocks %d, want %d", n, countBlocking(r, nodemaintv1alpha1.DeadlockReason))
		}
		rollout := r.OutAtOnce < len(r.Nodes)
		// live counts the live pods of each owner.
		live := map[string]int{}
		for i := range in.Pods {
			p := &in.Pods[i]
			if o := metav1.GetControllerOf(p); o != nil && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live[o.Name]++
			}
		}
		pods := map[string]*corev1.Pod{}
		for i := range in.Pods {
			pods[podKey(&in.Pods[i])] = &in.Pods[i]
		}
		for _, nr := range r.Nodes {
			byPod := map[string][]Finding{}
			worst := Severity("")
			for _, fd := range nr.Findings {
				if fd.Severity.rank() > worst.rank() {
					worst = fd.Severity
				}
				if len(fd.Pods) == 0 && fd.Reason != ReasonControlPlaneTogether {
					t.Errorf("%s: a finding without pods: %+v", nr.Name, fd)
				}
				for _, key := range fd.Pods {
					pod := pods[key]
					if pod == nil || pod.Spec.NodeName != nr.Name || !maintenance.Targeted(pod) {
						t.Errorf("%s: finding %s names %s, not a targeted pod of the node", nr.Name, fd.Reason, key)
						continue
					}
					byPod[key] = append(byPod[key], fd)
				}
				if fd.Reason == ReasonNoRoom && (fd.Severity == Blocks) != rollout {
					t.Errorf("%s: NoRoom of severity %s with %d of %d nodes out at once", nr.Name, fd.Severity, r.OutAtOnce, len(r.Nodes))
				}
			}
			cp := 0
			for _, n := range in.Nodes {
				if _, ok := n.Labels[nodemaintv1alpha1.ControlPlaneLabel]; ok && slices.Contains(in.Targets, n.Name) {
					cp++
				}
			}
			_, isCP := nodeOf(in, nr.Name).Labels[nodemaintv1alpha1.ControlPlaneLabel]
			together := slices.ContainsFunc(nr.Findings, func(fd Finding) bool { return fd.Reason == ReasonControlPlaneTogether && fd.Severity == Blocks })
			if want := isCP && cp >= 2 && in.MaxUnavailable <= 0; together != want {
				t.Errorf("%s: ControlPlaneTogether %v, want %v (control plane %v, %d control-plane targets, maxUnavailable %d)", nr.Name, together, want, isCP, cp, in.MaxUnavailable)
			}
			if worst != nr.Verdict {
				t.Errorf("%s: verdict %q, worst finding %q", nr.Name, nr.Verdict, worst)
			}
			targeted := 0
			for i := range in.Pods {
				if pod := &in.Pods[i]; pod.Spec.NodeName == nr.Name && maintenance.Targeted(pod) {
					targeted++
				}
			}
			if nr.Targeted != targeted {
				t.Errorf("%s: targeted %d; want %d", nr.Name, nr.Targeted, targeted)
			}
			if nr.Moved+nr.Skipped > nr.Targeted {
				t.Errorf("%s: moved %d + skipped %d, more than the %d targeted", nr.Name, nr.Moved, nr.Skipped, nr.Targeted)
			}
			out := map[string]bool{nr.Name: true}
			for _, n := range nr.OutWith {
				out[n] = true
			}
			if !rollout {
				for _, other := range r.Nodes {
					out[other.Name] = true
				}
			}
			if len(out) != r.OutAtOnce {
				t.Errorf("%s: out with %v, but %d out at once", nr.Name, nr.OutWith, r.OutAtOnce)
			}
			for i := range in.Pods {
				pod := &in.Pods[i]
				if pod.Spec.NodeName != nr.Name || !maintenance.Targeted(pod) || pod.DeletionTimestamp != nil || g.skipped[pod.Name] {
					continue
				}
				fs := byPod[podKey(pod)]
				has := func(reason string) bool {
					return slices.ContainsFunc(fs, func(fd Finding) bool { return fd.Reason == reason })
				}
				owner := metav1.GetControllerOf(pod)
				switch {
				case owner == nil && !has(ReasonBarePod):
					t.Errorf("%s: bare pod %s not reported lost: %+v", nr.Name, pod.Name, fs)
				case owner != nil && has(ReasonBarePod):
					t.Errorf("%s: pod %s of %s reported bare", nr.Name, pod.Name, owner.Name)
				}
				if owner != nil && fitsNowhere(in, pod, out) && !has(ReasonNoRoom) {
					t.Errorf("%s: the replacement of %s fits on no node left, not reported: %+v", nr.Name, pod.Name, fs)
				}
				surges := has(ReasonSurge)
				for _, blocks := range []string{ReasonBudgetBlocked, ReasonMultipleBudgets, ReasonBudgetExceededByTurn, ReasonCannotSurge} {
					if surges && has(blocks) {
						t.Errorf("%s: %s surges, yet is reported %s", nr.Name, pod.Name, blocks)
					}
				}
				var covering []policyv1.PodDisruptionBudget
				for _, b := range in.PodDisruptionBudgets {
					if b.Spec.Selector.MatchLabels["app"] == pod.Labels["app"] {
						covering = append(covering, b)
					}
				}
				if !surges && len(covering) == 1 && covering[0].Status.DisruptionsAllowed == 0 && pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod) &&
					!has(ReasonBudgetBlocked) {
					t.Errorf("%s: %s is evicted under budget %s that allows nothing, not reported blocked: %+v", nr.Name, pod.Name, covering[0].Name, fs)
				}
				if len(covering) > 1 && !surges && pod.Status.Phase == corev1.PodRunning && !has(ReasonMultipleBudgets) {
					t.Errorf("%s: %s under %d budgets not reported blocked", nr.Name, pod.Name, len(covering))
				}
				if owner != nil && !surges && live[owner.Name] == 1 && !has(ReasonCannotSurge) {
					t.Errorf("%s: %s is the only live pod of %s and does not surge, not reported CannotSurge: %+v", nr.Name, pod.Name, owner.Name, fs)
				}
				if surges && g.repels[pod.Name] && live[owner.Name] == 1 && repelledEverywhere(in, pod, out) {
					t.Errorf("%s: %s said to surge, but its anti-affinity leaves no node", nr.Name, pod.Name)
				}
				healthy := pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod)
				if !rollout && !surges && healthy && len(covering) == 1 && covering[0].Status.DisruptionsAllowed > 0 &&
					evictedUnder(in, r, covering[0]) > int(covering[0].Status.DisruptionsAllowed) && !has(ReasonBudgetExceededByTurn) {
					t.Errorf("%s: %s is evicted under %s, which allows %d while the targets hold %d of its evicted pods, not reported: %+v",
						nr.Name, pod.Name, covering[0].Name, covering[0].Status.DisruptionsAllowed, evictedUnder(in, r, covering[0]), fs)
				}
				if has(ReasonBudgetExceededByTurn) {
					if len(covering) != 1 {
						t.Errorf("%s: %s reported BudgetExceededByTurn under %d budgets; want one", nr.Name, pod.Name, len(covering))
					} else if allowed := covering[0].Status.DisruptionsAllowed; allowed <= 0 {
						t.Errorf("%s: %s reported BudgetExceededByTurn under %s, which allows %d; want one that allows some", nr.Name, pod.Name, covering[0].Name, allowed)
					} else if evicted := evictedUnder(in, r, covering[0]); evicted <= int(allowed) {
						t.Errorf("%s: %s reported BudgetExceededByTurn under %s, which allows %d of the %d evicted", nr.Name, pod.Name, covering[0].Name, allowed, evicted)
					}
				}
			}
		}
	})
}

func nodeOf(in Input, name string) *corev1.Node {
	for i := range in.Nodes {
		if in.Nodes[i].Name == name {
			return &in.Nodes[i]
		}
	}
	return nil
}

// countBlocking counts the findings of severity Blocks of the reasons.
func countBlocking(r Report, is func(string) bool) int {
	n := 0
	for _, nr := range r.Nodes {
		for _, fd := range nr.Findings {
			if fd.Severity == Blocks && is(fd.Reason) {
				n++
			}
		}
	}
	return n
}

// evictedUnder counts the pods on the targets the report says are evicted under the budget
// and take one of its disruptions (Running, under no other budget, not surged, not
// terminating, and Ready unless the budget is short of healthy pods: the Eviction API evicts
// an unready pod of a healthy enough budget without counting it): the pods one turn takes of
// it when every target is out at once.
func evictedUnder(in Input, r Report, b policyv1.PodDisruptionBudget) int {
	surged := map[string]bool{}
	for _, nr := range r.Nodes {
		for _, fd := range nr.Findings {
			if fd.Reason == ReasonSurge {
				for _, p := range fd.Pods {
					surged[p] = true
				}
			}
		}
	}
	n := 0
	for i := range in.Pods {
		pod := &in.Pods[i]
		if !slices.Contains(in.Targets, pod.Spec.NodeName) || !maintenance.Targeted(pod) || pod.DeletionTimestamp != nil || surged[podKey(pod)] ||
			pod.Status.Phase != corev1.PodRunning || pod.Labels["nodemaint.dev/drain"] == "skip" || len(pod.Spec.Tolerations) > 0 && pod.Spec.Tolerations[0].Key == "" {
			continue
		}
		if !podutils.IsPodReady(pod) && b.Status.DesiredHealthy > 0 && b.Status.CurrentHealthy >= b.Status.DesiredHealthy {
			continue
		}
		covering := 0
		for _, o := range in.PodDisruptionBudgets {
			if o.Spec.Selector.MatchLabels["app"] == pod.Labels["app"] {
				covering++
			}
		}
		if covering == 1 && b.Spec.Selector.MatchLabels["app"] == pod.Labels["app"] {
			n++
		}
	}
	return n
}

// repelledEverywhere re-states the anti-affinity the generated pods may have (required, on
// the hostname, against pods of their app): every node outside out that holds no pod of the
// app is kept from the pod by its node selector, a taint or a cordon.
func repelledEverywhere(in Input, pod *corev1.Pod, out map[string]bool) bool {
	held := map[string]bool{}
	for i := range in.Pods {
		p := &in.Pods[i]
		if p.DeletionTimestamp == nil && p.Labels["app"] == pod.Labels["app"] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			held[p.Spec.NodeName] = true
		}
	}
	tolerates := func(key string) bool {
		return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == key || t.Key == "" })
	}
	for _, n := range in.Nodes {
		if out[n.Name] || held[n.Name] || (n.Spec.Unschedulable && !tolerates(corev1.TaintNodeUnschedulable)) {
			continue
		}
		if v, ok := pod.Spec.NodeSelector["pool"]; ok && n.Labels["pool"] != v {
			continue
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return !tolerates(t.Key) }) {
			continue
		}
		return false
	}
	return true
}

// fitsNowhere re-states the filters for the generated clusters: the replacement of pod alone
// fits on no node outside out (node selector on "pool", NoSchedule taints by key with Exists
// tolerations, cordons, CPU free before anything moves).
func fitsNowhere(in Input, pod *corev1.Pod, out map[string]bool) bool {
	used := map[string]int64{}
	count := map[string]int64{}
	for i := range in.Pods {
		p := &in.Pods[i]
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			used[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			count[p.Spec.NodeName]++
		}
	}
	want := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	tolerates := func(key string) bool {
		return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == key || t.Key == "" })
	}
	for _, n := range in.Nodes {
		if out[n.Name] || (n.Spec.Unschedulable && !tolerates(corev1.TaintNodeUnschedulable)) {
			continue
		}
		if v, ok := pod.Spec.NodeSelector["pool"]; ok && n.Labels["pool"] != v {
			continue
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return !tolerates(t.Key) }) {
			continue
		}
		// As the scheduler: a resource the pod does not ask for is not checked.
		if (want == 0 || n.Status.Allocatable.Cpu().MilliValue()-used[n.Name] >= want) && n.Status.Allocatable.Pods().Value() > count[n.Name] {
			return false
		}
	}
	return true
}

// gen hands out the fuzzer's bytes; past their end it hands out zeros.
type gen struct {
	testutil.FuzzBytes
	// skipped names the generated pods the drain leaves (the skip label, a toleration of all);
	// repels those with a required anti-affinity on the hostname against their app.
	skipped, repels map[string]bool
}

var apps = []string{"a", "b", "c"}

// input is a cluster of up to 6 nodes, 16 pods, 3 budgets, 2 Deployments.
func (g *gen) input() Input {
	g.skipped, g.repels = map[string]bool{}, map[string]bool{}
	in := Input{NamespaceLabels: map[string]map[string]string{}}
	nNodes := 1 + int(g.Byte()%6)
	nTargets := 1 + int(g.Byte())%nNodes
	in.MaxUnavailable = int(g.Byte() % 4)
	nPods := int(g.Byte() % 17)
	for i := 0; i < nNodes; i++ {
		b := g.Byte()
		name := "n" + strconv.Itoa(i)
		n := node(name)
		n.Labels["pool"] = []string{"x", "y"}[b&1]
		n.Status.Allocatable[corev1.ResourceCPU] = *resource.NewMilliQuantity(500*(1+int64(b>>1&3)), resource.DecimalSI)
		if b&0x10 != 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}
		}
		n.Spec.Unschedulable = b&0x20 != 0
		if b&0x80 != 0 {
			n.Labels[nodemaintv1alpha1.ControlPlaneLabel] = ""
		}
		if b&0x40 != 0 {
			n.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(2, resource.DecimalSI)
		}
		in.Nodes = append(in.Nodes, n)
		if i < nTargets {
			in.Targets = append(in.Targets, name)
		}
	}
	for i, surge := range []int32{1, 0} {
		b := g.Byte()
		d, rs := deploymentWith("d"+strconv.Itoa(i), 1+int32(b&3), func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(surge))}
			d.Spec.Paused = b&4 != 0
		})
		in.Deployments, in.ReplicaSets = append(in.Deployments, d), append(in.ReplicaSets, rs)
	}
	for i := 0; i < int(g.Byte()%4); i++ {
		b := g.Byte()
		budget := pdb("pdb"+strconv.Itoa(i), int32(b&1)+int32(b>>6&1), int32(b>>1&3), int32(b>>3&3), apps[(b>>5)%3])
		if b&0x80 != 0 {
			budget.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}
		in.PodDisruptionBudgets = append(in.PodDisruptionBudgets, budget)
	}
	for i := 0; i < nPods; i++ {
		b, c := g.Byte(), g.Byte()
		name := "p" + strconv.Itoa(i)
		p := podOn("n"+strconv.Itoa(int(b)%nNodes), name, fmt.Sprintf("%dm", 250*int(c&7)), labelled("app", apps[(c>>3)%3]))
		switch (b >> 3) & 7 {
		case 0, 1:
			// bare
		case 2:
			ownedBy("ReplicaSet", "d0-rs")(&p)
		case 3:
			ownedBy("ReplicaSet", "d1-rs")(&p)
		case 4:
			ownedBy("DaemonSet", "agent")(&p)
		default:
			ownedBy("StatefulSet", "s"+strconv.Itoa(int(b>>6)))(&p)
		}
		if c&0x40 != 0 {
			p.Spec.NodeSelector = map[string]string{"pool": []string{"x", "y"}[c>>7]}
		}
		if b&0x80 != 0 && c&0x80 != 0 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
			}}}}
			g.repels[name] = true
		}
		switch d := g.Byte(); {
		case d&1 != 0:
			p.Spec.Tolerations = []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}}
		case d&2 != 0 && d&4 != 0:
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			g.skipped[name] = true
		case d&8 != 0:
			p.Labels["nodemaint.dev/drain"] = "skip"
			g.skipped[name] = true
		case d&0x10 != 0:
			p.Status.Phase = corev1.PodPending
		case d&0x20 != 0:
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		case d&0x40 != 0:
			p.DeletionTimestamp = &metav1.Time{}
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}
