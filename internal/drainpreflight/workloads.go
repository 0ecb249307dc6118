package drainpreflight

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
)

// workload is what recreates a pod once it is gone: a Deployment (through its ReplicaSet), a
// ReplicaSet without one, a StatefulSet, or any other controller.
type workload struct {
	kind, namespace, name string
	// surges: the Deployment responder moves its pods by surging; else noSurge says why not.
	surges  bool
	noSurge string
	// live counts its pods that are not terminating (bound or not).
	live int
}

func (w *workload) String() string { return w.kind + " " + w.namespace + "/" + w.name }

// workloads resolves the controllers of pods. Made, it resolves every pod of its cluster and
// changes no more: concurrent preflights share it.
type workloads struct {
	replicaSets map[types.UID]*appsv1.ReplicaSet
	deployments map[types.UID]*appsv1.Deployment
	// rsOf are the ReplicaSets of each Deployment.
	rsOf map[types.UID][]*appsv1.ReplicaSet
	// autoscalers are the HorizontalPodAutoscalers, by namespace.
	autoscalers map[string][]*autoscalingv2.HorizontalPodAutoscaler
	// byKey are the workloads resolved, by kind/namespace/name; made, nothing is added.
	byKey map[string]*workload
	made  bool
}

func newWorkloads(c *Cluster) *workloads {
	ws := &workloads{
		replicaSets: make(map[types.UID]*appsv1.ReplicaSet, len(c.ReplicaSets)),
		deployments: make(map[types.UID]*appsv1.Deployment, len(c.Deployments)),
		rsOf:        map[types.UID][]*appsv1.ReplicaSet{},
		autoscalers: map[string][]*autoscalingv2.HorizontalPodAutoscaler{},
		byKey:       map[string]*workload{},
	}
	for _, d := range c.Deployments {
		ws.deployments[d.UID] = d
	}
	for _, rs := range c.ReplicaSets {
		ws.replicaSets[rs.UID] = rs
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
			ws.rsOf[ref.UID] = append(ws.rsOf[ref.UID], rs)
		}
	}
	for _, hpa := range c.HorizontalPodAutoscalers {
		ws.autoscalers[hpa.Namespace] = append(ws.autoscalers[hpa.Namespace], hpa)
	}
	// Resolve every pod, and count the live pods of every workload, to tell whether one goes
	// down as a whole.
	for _, pod := range c.Pods {
		w := ws.of(pod)
		if w == nil || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		w.live++
	}
	ws.made = true
	return ws
}

// of is the workload of the pod; nil for a bare pod.
func (ws *workloads) of(pod *corev1.Pod) *workload {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	kind, name := ref.Kind, ref.Name
	var build func(w *workload)
	switch {
	case ref.Kind == "ReplicaSet" && ws.replicaSets[ref.UID] != nil:
		rs := ws.replicaSets[ref.UID]
		if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" && ws.deployments[dref.UID] != nil {
			d := ws.deployments[dref.UID]
			kind, name = "Deployment", d.Name
			build = func(w *workload) { ws.deploymentSurge(w, d) }
			break
		}
		build = func(w *workload) {
			w.noSurge = "a ReplicaSet without a Deployment does not surge: its pods are evicted once the response timeout runs out, unless its owner accepts the evacuation request"
		}
	case ref.Kind == "StatefulSet":
		build = func(w *workload) {
			w.noSurge = "a StatefulSet does not surge (it recreates a pod, under the same name, only once it is gone): its pods are evicted once the response timeout runs out"
		}
	default:
		build = func(w *workload) {
			w.noSurge = fmt.Sprintf("nodemaint does not surge a %s: its pods are evicted once the response timeout runs out, unless its controller accepts the evacuation request", ref.Kind)
		}
	}
	key := kind + "/" + pod.Namespace + "/" + name
	if w, ok := ws.byKey[key]; ok {
		return w
	}
	w := &workload{kind: kind, namespace: pod.Namespace, name: name}
	build(w)
	if !ws.made { // else a pod of another cluster: resolved, not kept
		ws.byKey[key] = w
	}
	return w
}

// deploymentSurge decides, as the Deployment responder does, whether it surges the Deployment.
func (ws *workloads) deploymentSurge(w *workload, d *appsv1.Deployment) {
	autoscalers := 0
	for _, hpa := range ws.autoscalers[d.Namespace] {
		if surgepolicy.Autoscales(hpa, d.Name) {
			autoscalers++
		}
	}
	ok, _, message := surgepolicy.Surges(d, ws.rsOf[d.UID], autoscalers)
	w.surges = ok
	if !ok {
		if message == "" {
			message = "the Deployment has no replicas"
		}
		w.noSurge = message
	}
}

// budget is a PodDisruptionBudget with its selector.
type budget struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
}

func (b budget) String() string { return b.pdb.Namespace + "/" + b.pdb.Name }

// budgets finds the PodDisruptionBudgets of pods.
type budgets map[string][]budget

func newBudgets(list []*policyv1.PodDisruptionBudget) budgets {
	bs := budgets{}
	for _, pdb := range list {
		// policy/v1: a nil selector selects no pod, an empty one every pod of the namespace.
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue // the API server refuses such a selector
		}
		bs[pdb.Namespace] = append(bs[pdb.Namespace], budget{pdb: pdb, selector: sel})
	}
	for ns := range bs {
		sort.Slice(bs[ns], func(i, j int) bool { return bs[ns][i].pdb.Name < bs[ns][j].pdb.Name })
	}
	return bs
}

// of are the budgets covering the pod.
func (bs budgets) of(pod *corev1.Pod) []budget {
	var out []budget
	for _, b := range bs[pod.Namespace] {
		if b.selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, b)
		}
	}
	return out
}

// evictionIgnores reports whether the Eviction API evicts the pod whatever its budget allows:
// a pod not running yet (Pending), or one that is not Ready while the budget is healthy enough
// or allows evicting unhealthy pods (unhealthyPodEvictionPolicy AlwaysAllow).
func evictionIgnores(pod *corev1.Pod, b budget) bool {
	if pod.Status.Phase == corev1.PodPending {
		return true
	}
	if podutils.IsPodReady(pod) {
		return false
	}
	st := b.pdb.Status
	if st.DesiredHealthy > 0 && st.CurrentHealthy >= st.DesiredHealthy {
		return true
	}
	p := b.pdb.Spec.UnhealthyPodEvictionPolicy
	return p != nil && *p == policyv1.AlwaysAllow
}

// budgetNote says what the budgets of a workload's pod allow now.
func budgetNote(bs []budget) string {
	switch len(bs) {
	case 0:
		return "no PodDisruptionBudget"
	case 1:
		n := bs[0].pdb.Status.DisruptionsAllowed
		return fmt.Sprintf("PodDisruptionBudget %s allows %d %s now", bs[0], n, plural(int(n), "disruption", "disruptions"))
	}
	return "PodDisruptionBudgets " + budgetNames(bs)
}

func budgetNames(bs []budget) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.String()
	}
	return strings.Join(names, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
