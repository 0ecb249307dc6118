package main

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/test/localcluster"
)

// Workload kinds.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
)

// kwok's defaults: a pod is created (has an IP) 1s after it is scheduled.
const createDelay = time.Second

// terminationGracePeriod is the pods' deletion grace period, Kubernetes' default.
const terminationGracePeriod = 30 * time.Second

// Workload is one Deployment or StatefulSet of a scenario, with its PodDisruptionBudget.
type Workload struct {
	Name     string
	Kind     string
	Replicas int32
	// MaxSurgePercent is the Deployment's maxSurge; 0 means Kubernetes' default, 25%.
	MaxSurgePercent int
	// PDBMinAvailable and PDBMaxUnavailable make a PodDisruptionBudget when set (> 0, or
	// PDBNever for maxUnavailable 0).
	PDBMinAvailable   int
	PDBMaxUnavailable int
	PDBNever          bool
	// PDBMaxUnavailablePercent makes the budget's maxUnavailable a percentage of the replicas
	// (when PDBMaxUnavailable and PDBMinAvailable are 0).
	PDBMaxUnavailablePercent int
	// ReadyDelay is the pods' start-up time (kwok), DeleteDelay their shutdown time.
	ReadyDelay, DeleteDelay time.Duration
	// Node pins the pods to a node.
	Node string
	// Pool confines the pods to these nodes (a required node affinity on their host name), as
	// the workloads of a node pool select it.
	Pool []string
	// PoolSelector confines the pods to the nodes with these labels (a node selector): a pool
	// of a thousand nodes as a label, where a list of host names would put the thousand names
	// in every pod.
	PoolSelector map[string]string
	// Blocker marks the pod no one may evict (PDB maxUnavailable 0): it stays, and is left out
	// of "nodes empty" and "back at full availability".
	Blocker bool
}

func (w Workload) startup() time.Duration  { return createDelay + w.ReadyDelay }
func (w Workload) shutdown() time.Duration { return min(w.DeleteDelay, terminationGracePeriod) }

// Scenario is a set of workloads on the target nodes, drained by each method in turn.
type Scenario struct {
	Name        string
	Description string
	// Targets are the nodes drained; the workloads start on them only.
	Targets int
	// Nodes is the least number of nodes of the cluster.
	Nodes     int
	Workloads []Workload
	// Timeout, when longer than -run-timeout, bounds each run of this scenario instead.
	Timeout time.Duration
	// Rollout makes the scenario a rolling maintenance of a node pool, the target nodes: each
	// node in turn is drained, rebooted and put back in service, and the pods, confined to the
	// pool, come back to the rebooted nodes.
	Rollout *Rollout
	// LabelPool: the target nodes carry poolLabel=<scenario name> (set by the run's setup, and
	// taken off every other node), the NodeMaintenance selects them by it and the workloads'
	// PoolSelector should name it.
	LabelPool bool
	// Goals are the figures the scenario is meant to meet, reported beside the results.
	Goals *Goals
}

// poolLabel marks the nodes of a scenario's pool (LabelPool): its value is the scenario's name.
const poolLabel = "bench.nodemaint.dev/pool"

// Goals are a scenario's targets; zero means none.
type Goals struct {
	// TotalRatio bounds nodemaint's total time over its ideal (a rolling maintenance).
	TotalRatio float64 `json:"totalRatio,omitempty"`
	// PeakRSSMiB bounds the controller's peak RSS.
	PeakRSSMiB float64 `json:"peakRSSMiB,omitempty"`
}

// Rollout is how a rolling maintenance goes through the pool.
type Rollout struct {
	// MaxUnavailable is nodemaint's spec.rollout.maxUnavailable: a number of nodes, or a
	// percentage of the pool.
	MaxUnavailable intstr.IntOrString
	// ClassicAtOnce is how many nodes the classic loop takes at once (kured's --concurrency); 0
	// is one, kured's default.
	ClassicAtOnce int
	// Reboot is the simulated reboot's time: from the node going down until its kubelet is
	// back, with a new boot ID.
	Reboot time.Duration
}

// atOnce is how many nodes of a pool of pool nodes the method takes at once.
func (r Rollout) atOnce(method string, pool int) int {
	if isNodemaint(method) {
		n, err := resolveMaxUnavailable(r.MaxUnavailable, pool)
		if err != nil {
			return 1
		}
		return n
	}
	return max(1, r.ClassicAtOnce)
}

// resolveMaxUnavailable is how many nodes of a pool of pool nodes spec.rollout.maxUnavailable
// lets a rollout take at once, as the CRD and the controller (rollout.Budget) read it: a number
// of at least 1, or a percentage from 1% to 100% of the pool rounded down, at least 1.
func resolveMaxUnavailable(v intstr.IntOrString, pool int) (int, error) {
	if v.Type == intstr.String && !validPercent.MatchString(v.StrVal) {
		return 0, fmt.Errorf("maxUnavailable %q: want a percentage from 1%% to 100%%", v.StrVal)
	}
	if v.Type == intstr.Int && v.IntVal < 1 {
		return 0, fmt.Errorf("maxUnavailable %d: want at least 1", v.IntVal)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, pool, false)
	if err != nil {
		return 0, err
	}
	return max(1, n), nil
}

// validPercent is the CRD's rule for a percentage of maxUnavailable.
var validPercent = regexp.MustCompile(`^([1-9][0-9]?|100)%$`)

func (s Scenario) pods() int {
	n := 0
	for _, w := range s.Workloads {
		n += int(w.Replicas)
	}
	return n
}

func (s Scenario) targetNodes() []string {
	out := make([]string, s.Targets)
	for i := range out {
		out[i] = localcluster.NodeNamePrefix + strconv.Itoa(i)
	}
	return out
}

const sec = time.Second

// scenarios returns the scenarios by name.
func scenarios() map[string]Scenario {
	s := Scenario{
		Name: "S", Targets: 1, Nodes: 10,
		Description: "1 node, 30 pods: Deployments (one of 10 with a PDB maxUnavailable 1), four single-replica Deployments with strict PDBs (minAvailable 1), a StatefulSet of 3 with a PDB maxUnavailable 1",
		Workloads: []Workload{
			{Name: "web", Kind: KindDeployment, Replicas: 10, PDBMaxUnavailable: 1, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "api", Kind: KindDeployment, Replicas: 6, PDBMinAvailable: 3, ReadyDelay: 8 * sec, DeleteDelay: 3 * sec},
			{Name: "worker", Kind: KindDeployment, Replicas: 7, ReadyDelay: 3 * sec, DeleteDelay: 5 * sec},
			{Name: "single-a", Kind: KindDeployment, Replicas: 1, PDBMinAvailable: 1, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "single-b", Kind: KindDeployment, Replicas: 1, PDBMinAvailable: 1, ReadyDelay: 10 * sec, DeleteDelay: 2 * sec},
			{Name: "single-c", Kind: KindDeployment, Replicas: 1, PDBMinAvailable: 1, ReadyDelay: 3 * sec, DeleteDelay: 1 * sec},
			{Name: "single-d", Kind: KindDeployment, Replicas: 1, PDBMinAvailable: 1, ReadyDelay: 3 * sec, DeleteDelay: 1 * sec},
			{Name: "db", Kind: KindStatefulSet, Replicas: 3, PDBMaxUnavailable: 1, ReadyDelay: 10 * sec, DeleteDelay: 5 * sec},
		},
	}
	b := Scenario{
		Name: "B", Targets: 5, Nodes: 10,
		Description: "5 nodes of 20 pods; kwok-node-0 also holds a pod whose PDB never allows a disruption: time until the 4 others are drained",
		Workloads: []Workload{
			{Name: "web", Kind: KindDeployment, Replicas: 40, PDBMaxUnavailable: 4, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "api", Kind: KindDeployment, Replicas: 30, ReadyDelay: 5 * sec, DeleteDelay: 3 * sec},
			{Name: "worker", Kind: KindDeployment, Replicas: 20, ReadyDelay: 3 * sec, DeleteDelay: 5 * sec},
			{Name: "cache", Kind: KindStatefulSet, Replicas: 9, PDBMaxUnavailable: 3, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "blocker", Kind: KindStatefulSet, Replicas: 1, PDBNever: true, ReadyDelay: sec, DeleteDelay: sec,
				Node: localcluster.NodeNamePrefix + "0", Blocker: true},
		},
	}
	// No StatefulSets at this size: kwok v0.8.0 deletes a pod by name once its shutdown delay
	// is over, and on a loaded machine that delete can hit the StatefulSet's replacement of the
	// same name, which starts a loop of deletes (see docs/benchmarks.md).
	m := Scenario{
		Name: "M", Targets: 10, Nodes: 100,
		Description: "10 of 100 nodes, 1,000 pods: 20 Deployments of 50 with a PDB maxUnavailable 10%",
	}
	for i := range 20 {
		m.Workloads = append(m.Workloads, Workload{Name: fmt.Sprintf("deploy-%02d", i), Kind: KindDeployment, Replicas: 50,
			PDBMaxUnavailable: 5, ReadyDelay: time.Duration(2+i%4) * sec, DeleteDelay: time.Duration(1+i%3) * sec})
	}
	// Deployments only, for the reason M has no StatefulSets.
	l := Scenario{
		Name: "L", Targets: 100, Nodes: 1000, Timeout: time.Hour,
		Description: "100 of 1,000 nodes, 10,000 pods: 100 Deployments of 100 with a PDB maxUnavailable 10%",
	}
	for i := range 100 {
		l.Workloads = append(l.Workloads, Workload{Name: fmt.Sprintf("deploy-%02d", i), Kind: KindDeployment, Replicas: 100,
			PDBMaxUnavailable: 10, ReadyDelay: time.Duration(2+i%4) * sec, DeleteDelay: time.Duration(1+i%3) * sec})
	}
	// A node pool rebooted node by node, as kured or system-upgrade-controller do it: 200 pods,
	// about 10 a node, all with a budget of one disruption at a time.
	p := Scenario{
		Name: "P", Targets: 20, Nodes: 20, Timeout: 40 * time.Minute,
		Rollout: &Rollout{MaxUnavailable: intstr.FromInt32(2), Reboot: 10 * sec},
		Description: "a pool of 20 nodes, each drained, rebooted (10s) and put back in turn: nodemaint 2 nodes at a time " +
			"(spec.rollout maxUnavailable 2, release Rebooted), the classic loop of a reboot daemon one at a time; " +
			"200 pods confined to the pool: four Deployments (80, 60, 40, 17) and a StatefulSet of 3, each with a PDB maxUnavailable 1",
		Workloads: []Workload{
			{Name: "web", Kind: KindDeployment, Replicas: 80, PDBMaxUnavailable: 1, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "api", Kind: KindDeployment, Replicas: 60, PDBMaxUnavailable: 1, ReadyDelay: 8 * sec, DeleteDelay: 3 * sec},
			{Name: "worker", Kind: KindDeployment, Replicas: 40, PDBMaxUnavailable: 1, ReadyDelay: 3 * sec, DeleteDelay: 5 * sec},
			{Name: "cache", Kind: KindDeployment, Replicas: 17, PDBMaxUnavailable: 1, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec},
			{Name: "db", Kind: KindStatefulSet, Replicas: 3, PDBMaxUnavailable: 1, ReadyDelay: 10 * sec, DeleteDelay: 5 * sec},
		},
	}
	for i := range p.Workloads {
		p.Workloads[i].Pool = p.targetNodes()
	}
	return map[string]Scenario{"S": s, "B": b, "M": m, "L": l, "P": p, "F": fleet(fleetNodes)}
}

// appLabel names a pod's workload.
const appLabel = "app"

// objects returns the workload's Deployment or StatefulSet and its PodDisruptionBudget (nil
// when it has none), in namespace.
func (w Workload) objects(namespace string) (workload, pdb any) {
	labels := map[string]string{appLabel: w.Name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels: labels,
			Annotations: map[string]string{
				localcluster.PodCreateDelayAnnotation: createDelay.String(),
				localcluster.PodReadyDelayAnnotation:  w.ReadyDelay.String(),
				localcluster.PodDeleteDelayAnnotation: w.DeleteDelay.String(),
			},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "bench.invalid/app"}},
			TerminationGracePeriodSeconds: ptr.To(int64(terminationGracePeriod.Seconds())),
		},
	}
	if w.Node != "" {
		tmpl.Spec.NodeSelector = map[string]string{corev1.LabelHostname: w.Node}
	}
	if len(w.PoolSelector) > 0 {
		tmpl.Spec.NodeSelector = maps.Clone(w.PoolSelector)
	}
	if len(w.Pool) > 0 {
		tmpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: w.Pool}},
			}}},
		}}
	}
	meta := metav1.ObjectMeta{Name: w.Name, Namespace: namespace, Labels: labels}
	selector := &metav1.LabelSelector{MatchLabels: labels}
	switch w.Kind {
	case KindDeployment:
		d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(w.Replicas), Selector: selector, Template: tmpl}}
		if w.MaxSurgePercent > 0 {
			surge := intstr.FromString(strconv.Itoa(w.MaxSurgePercent) + "%")
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge}}
		}
		workload = d
	default:
		workload = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(w.Replicas), Selector: selector, Template: tmpl, ServiceName: w.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
		}}
	}
	if w.PDBMinAvailable == 0 && w.PDBMaxUnavailable == 0 && w.PDBMaxUnavailablePercent == 0 && !w.PDBNever {
		return workload, nil
	}
	p := &policyv1.PodDisruptionBudget{ObjectMeta: meta, Spec: policyv1.PodDisruptionBudgetSpec{Selector: selector}}
	switch {
	case w.PDBMinAvailable > 0:
		p.Spec.MinAvailable = ptr.To(intstr.FromInt32(int32(w.PDBMinAvailable)))
	case w.PDBMaxUnavailable == 0 && w.PDBMaxUnavailablePercent > 0:
		p.Spec.MaxUnavailable = ptr.To(intstr.FromString(strconv.Itoa(w.PDBMaxUnavailablePercent) + "%"))
	default:
		p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(int32(w.PDBMaxUnavailable)))
	}
	return workload, p
}
