package invariants

import (
	"encoding/json"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// state is what the checker knows of the cluster, fed one object at a time by the informers
// (or by a unit test). It is not safe for concurrent use; Checker locks around it.
type state struct {
	onViolation func(Violation)

	pods         map[string]*corev1.Pod
	pdbs         map[string]*budget
	deployments  map[string]*deployment
	replicaSets  map[string]*appsv1.ReplicaSet
	statefulSets map[string]*appsv1.StatefulSet
	// hpas are the HorizontalPodAutoscalers: the Deployments they scale are not surged.
	hpas     map[string]*autoscalingv2.HorizontalPodAutoscaler
	baseline Baseline

	violations []Violation

	// acts is the state of the act checks (acts.go); nil without an audit log.
	acts *acts
	// alertGate is the state of the alert gate's check (alertgate.go); nil without a stand-in
	// Prometheus.
	alertGate *alertGate
	// capi is the state of the Machine checks (machines.go); nil without Options.ClusterAPI.
	capi *capi
	// controlPlanes are the control-plane nodes cordoned now, with the maintenances that cordon
	// each (controlplane.go).
	controlPlanes map[string][]string

	// gap, while a watch gap's relists are being delivered: events are applied but judged only
	// when it closes, by a replay of what the objects carry (gap.go).
	gap *gap
	// lastEvent is when the last event was applied outside a gap.
	lastEvent time.Time
	// gapChanges counts the pods' changes the gaps' replays found (joins, downs, leaves).
	gapChanges int
}

// budget is a PodDisruptionBudget; armed once it was seen satisfied.
type budget struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	armed    bool
}

// deployment is a Deployment; armed once it was seen with all its replicas Ready. noRoom once
// one of its pods could not be scheduled: a surge with nowhere to go, which the Deployment
// responder gives up, so that evictions through its budget move the pods.
type deployment struct {
	d      *appsv1.Deployment
	armed  bool
	noRoom bool
}

// Baseline is what nodemaint must restore, recorded when the checker first saw each object.
type Baseline struct {
	// Unschedulable and OutOfService: nodes that were cordoned, or had the out-of-service taint,
	// when first seen (someone else's, they stay).
	Unschedulable, OutOfService map[string]bool
	// Autoscalers are the autoscaler annotations (nodedecide.AutoscalerAnnotations) each node
	// had when first seen, by node and key: someone else's, they stay as they were.
	Autoscalers map[string]map[string]string
	// Replicas of each Deployment as its user set them (the surge's original replicas when it
	// was first seen mid-surge).
	Replicas map[string]int32
}

func newState(onViolation func(Violation)) *state {
	return &state{
		onViolation:  onViolation,
		pods:         map[string]*corev1.Pod{},
		pdbs:         map[string]*budget{},
		deployments:  map[string]*deployment{},
		replicaSets:  map[string]*appsv1.ReplicaSet{},
		statefulSets: map[string]*appsv1.StatefulSet{},
		hpas:         map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		baseline: Baseline{
			Unschedulable: map[string]bool{}, OutOfService: map[string]bool{}, Replicas: map[string]int32{},
			Autoscalers: map[string]map[string]string{},
		},
	}
}

// healthy is how the disruption controller counts a pod: Ready and not terminating.
func healthy(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	return podutils.IsPodReady(pod)
}

// pod records a pod's change and checks the budgets and the Deployment it counts for. A
// violation needs a pod that leaves: it was healthy and is deleted or terminating (a voluntary
// disruption; turning not Ready is none).
func (s *state) pod(pod *corev1.Pod, deleted bool, now time.Time) {
	k := key(pod.Namespace, pod.Name)
	old := s.pods[k]
	wasHealthy := healthy(old)
	if deleted {
		delete(s.pods, k)
		s.podGone(pod, now)
	} else {
		if old != nil && old.UID != pod.UID {
			// Replaced under the same name (a StatefulSet's pod, seen across a relist): the
			// first is gone.
			s.podGone(old, now)
		}
		s.pods[k] = pod
	}
	left := wasHealthy && (deleted || pod.DeletionTimestamp != nil)
	for bk, b := range s.pdbs {
		if b.pdb.Namespace == pod.Namespace && selectorMatches(b.selector, pod.Labels) {
			s.checkBudget(bk, b, left, k, now)
		}
	}
	if dk := s.deploymentOf(pod); dk != "" {
		if d := s.deployments[dk]; d != nil {
			d.noRoom = d.noRoom || (!deleted && unschedulable(pod))
			s.checkDeployment(dk, d, left, k, now)
		}
	}
}

func (s *state) pdb(pdb *policyv1.PodDisruptionBudget, deleted bool) {
	k := key(pdb.Namespace, pdb.Name)
	if deleted {
		delete(s.pdbs, k)
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		sel = nil
	}
	b := s.pdbs[k]
	if b == nil {
		b = &budget{}
		s.pdbs[k] = b
	}
	b.pdb, b.selector = pdb, sel
	s.checkBudget(k, b, false, "", time.Time{})
}

func (s *state) deployment(d *appsv1.Deployment, deleted bool) {
	k := key(d.Namespace, d.Name)
	if deleted {
		delete(s.deployments, k)
		delete(s.baseline.Replicas, k)
		return
	}
	if _, ok := s.baseline.Replicas[k]; !ok {
		s.baseline.Replicas[k] = userReplicas(d)
	}
	dep := s.deployments[k]
	if dep == nil {
		dep = &deployment{}
		s.deployments[k] = dep
	}
	dep.d = d
	s.checkDeployment(k, dep, false, "", time.Time{})
	s.recheckBudgets(d.Namespace)
}

func (s *state) replicaSet(rs *appsv1.ReplicaSet, deleted bool) {
	k := key(rs.Namespace, rs.Name)
	if deleted {
		delete(s.replicaSets, k)
		return
	}
	s.replicaSets[k] = rs
	s.recheckBudgets(rs.Namespace)
	s.recheckDeployments(rs.Namespace)
}

func (s *state) statefulSet(sts *appsv1.StatefulSet, deleted bool) {
	k := key(sts.Namespace, sts.Name)
	if deleted {
		delete(s.statefulSets, k)
		return
	}
	s.statefulSets[k] = sts
	s.recheckBudgets(sts.Namespace)
}

func (s *state) node(node *corev1.Node, deleted bool) {
	s.nodeForActs(node, deleted)
	if deleted {
		return
	}
	if _, seen := s.baseline.Unschedulable[node.Name]; seen {
		return
	}
	s.baseline.Unschedulable[node.Name] = node.Spec.Unschedulable
	for _, k := range nodedecide.AutoscalerAnnotations {
		if v, ok := node.Annotations[k]; ok {
			if s.baseline.Autoscalers[node.Name] == nil {
				s.baseline.Autoscalers[node.Name] = map[string]string{}
			}
			s.baseline.Autoscalers[node.Name][k] = v
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			s.baseline.OutOfService[node.Name] = true
		}
	}
}

// recheckDeployments arms the Deployments of the namespace whose pods a ReplicaSet just tied to
// them: the informers deliver the first list of each kind in no particular order, and pods seen
// before their ReplicaSet count for no Deployment. It never reports a violation (no pod left).
func (s *state) recheckDeployments(namespace string) {
	for k, d := range s.deployments {
		if d.d.Namespace == namespace && !d.armed {
			s.checkDeployment(k, d, false, "", time.Time{})
		}
	}
}

// recheckBudgets arms the budgets of the namespace that a change of a controller's scale may
// have satisfied; it never reports a violation (no pod left).
func (s *state) recheckBudgets(namespace string) {
	for k, b := range s.pdbs {
		if b.pdb.Namespace == namespace && !b.armed {
			s.checkBudget(k, b, false, "", time.Time{})
		}
	}
}

// checkBudget arms the budget when it is satisfied, and reports a violation when it is not,
// was satisfied before, and the pod podKey just left.
func (s *state) checkBudget(k string, b *budget, left bool, podKey string, now time.Time) {
	healthyPods, want, ok := s.budgetCounts(b)
	if !ok {
		return
	}
	if healthyPods >= want {
		// A budget that allows every pod to go (before its pods or controllers are known, too)
		// cannot be violated: it is armed only once it protects something.
		b.armed = b.armed || want > 0
		return
	}
	if b.armed && left {
		s.report(Violation{Time: now, Kind: KindPodDisruptionBudget, Object: k, Pod: podKey, Healthy: healthyPods, Want: want})
	}
}

// budgetCounts returns the healthy pods a budget selects and the least number it allows, as the
// disruption controller computes them, except that the expected pods are the replicas the
// workloads' users asked for (a surge does not raise them). ok is false when the budget cannot
// be computed (a percentage or maxUnavailable over pods without a known controller).
func (s *state) budgetCounts(b *budget) (healthyPods, want int32, ok bool) {
	if b.selector == nil || b.selector.Empty() {
		return 0, 0, false
	}
	spec := b.pdb.Spec
	controllers := map[string]int32{}
	unknown := false
	for _, pod := range s.pods {
		if pod.Namespace != b.pdb.Namespace || !b.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if healthy(pod) {
			healthyPods++
		}
		if c, n, known := s.controllerScale(pod); known {
			controllers[c] = n
		} else {
			unknown = true
		}
	}
	if spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.Int {
		return healthyPods, spec.MinAvailable.IntVal, true
	}
	if unknown {
		return 0, 0, false
	}
	var expected int32
	for _, n := range controllers {
		expected += n
	}
	switch {
	case spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, false
		}
		return healthyPods, int32(v), true
	case spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, false
		}
		return healthyPods, max(expected-int32(v), 0), true
	}
	return 0, 0, false
}

// controllerScale returns the pod's scalable controller (the Deployment for a ReplicaSet of a
// Deployment) and the replicas its user asked for.
func (s *state) controllerScale(pod *corev1.Pod) (string, int32, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", 0, false
	}
	switch ref.Kind {
	case "ReplicaSet":
		if dk := s.deploymentOf(pod); dk != "" {
			if d := s.deployments[dk]; d != nil {
				return "Deployment/" + dk, s.userReplicas(d.d), true
			}
			return "", 0, false
		}
		rs := s.replicaSets[key(pod.Namespace, ref.Name)]
		if rs == nil {
			return "", 0, false
		}
		return "ReplicaSet/" + key(rs.Namespace, rs.Name), ptr.Deref(rs.Spec.Replicas, 1), true
	case "StatefulSet":
		sts := s.statefulSets[key(pod.Namespace, ref.Name)]
		if sts == nil {
			return "", 0, false
		}
		return "StatefulSet/" + key(sts.Namespace, sts.Name), ptr.Deref(sts.Spec.Replicas, 1), true
	}
	return "", 0, false
}

// deploymentOf returns the key of the Deployment whose ReplicaSet controls the pod, "" when
// none is known.
func (s *state) deploymentOf(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	rs := s.replicaSets[key(pod.Namespace, ref.Name)]
	if rs == nil {
		return ""
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
		return key(rs.Namespace, dref.Name)
	}
	return ""
}

// checkDeployment arms a surge-capable Deployment once all its replicas are Ready, and reports a
// violation when a pod left and fewer are Ready.
func (s *state) checkDeployment(k string, d *deployment, left bool, podKey string, now time.Time) {
	if !s.keepsReplicas(d) {
		return
	}
	ready, want := s.deploymentCounts(k, d)
	if ready >= want {
		d.armed = d.armed || want > 0
		return
	}
	if d.armed && left {
		s.report(Violation{Time: now, Kind: KindDeploymentReady, Object: k, Pod: podKey, Healthy: ready, Want: want})
	}
}

// deploymentCounts returns the Ready pods of a Deployment and the replicas its user asked for.
func (s *state) deploymentCounts(k string, d *deployment) (ready, want int32) {
	for _, pod := range s.pods {
		if pod.Namespace == d.d.Namespace && healthy(pod) && s.deploymentOf(pod) == k {
			ready++
		}
	}
	return ready, s.userReplicas(d.d)
}

// report records a violation found on an event; during a gap events come in no order, and the
// gap's replay judges them instead.
func (s *state) report(v Violation) {
	if s.gap != nil {
		return
	}
	s.record(v)
}

func (s *state) record(v Violation) {
	if a := s.acts; a != nil && v.Act == "" && v.Pod != "" {
		// A budget or Deployment the pod's leaving breached: held until the audit log says
		// whether nodemaint deleted the pod when a maintenance's Delete was due (acts.go).
		at := v.Time
		if at.IsZero() {
			at = time.Now()
		}
		a.held = append(a.held, heldViolation{v: v, at: at})
		return
	}
	s.emit(v)
}

// emit records the violation and tells Options.OnViolation.
func (s *state) emit(v Violation) {
	s.violations = append(s.violations, v)
	if s.onViolation != nil {
		s.onViolation(v)
	}
}

// unschedulable reports whether the scheduler found no node for the pod.
func unschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// hpa records a HorizontalPodAutoscaler and checks the Deployments of its namespace again.
func (s *state) hpa(h *autoscalingv2.HorizontalPodAutoscaler, deleted bool) {
	k := key(h.Namespace, h.Name)
	if deleted {
		delete(s.hpas, k)
	} else {
		s.hpas[k] = h
	}
	s.recheckDeployments(h.Namespace)
}

// ambiguouslyAutoscaled reports whether more than one HorizontalPodAutoscaler scales the
// Deployment: the Deployment responder declines it and evictions through its budget move its
// pods. One autoscaler is no obstacle: the responder raises its bounds during the surge.
func (s *state) ambiguouslyAutoscaled(d *appsv1.Deployment) bool {
	n := 0
	for _, h := range s.hpas {
		ref := h.Spec.ScaleTargetRef
		if h.Namespace == d.Namespace && ref.Kind == "Deployment" && ref.Name == d.Name && strings.HasPrefix(ref.APIVersion, "apps/") {
			n++
		}
	}
	return n > 1
}

// keepsReplicas: the Deployment responder moves the Deployment's pods by surging, so none goes
// down: it is surge-capable, at most one HorizontalPodAutoscaler scales it, and its surge found
// room.
func (s *state) keepsReplicas(d *deployment) bool {
	return surgeCapable(d.d) && !d.noRoom && !s.ambiguouslyAutoscaled(d.d)
}

// surgeCapable: the Deployment responder moves its pods by surging, so none goes down.
func surgeCapable(d *appsv1.Deployment) bool {
	if d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return false
	}
	surge := intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(userReplicas(d)), true)
	return err == nil && v > 0
}

// userReplicas is the Deployment's replicas without nodemaint's surge, the surge its
// HorizontalPodAutoscaler carried out included: while the autoscaler's minimum is raised for a
// surge, or restored but not yet acted on, the autoscaler may scale the Deployment to the surged
// count on its own (the responder adopts that count, or scales it back), and the Deployment then
// carries no surge record of its own. The autoscaler's record says so: it names the Deployment
// and the surge, its UID the autoscaler's.
func (s *state) userReplicas(d *appsv1.Deployment) int32 {
	if _, ok := d.Annotations[evacuation.SurgeAnnotation]; !ok {
		for _, h := range s.hpas {
			if original, ok := autoscalerSurge(h, d); ok {
				return original
			}
		}
	}
	return userReplicas(d)
}

// autoscalerSurge returns the Deployment's replicas before the surge that the autoscaler's
// record of nodemaint's raised bounds names, when the Deployment's count is that surge's.
func autoscalerSurge(h *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment) (int32, bool) {
	ref := h.Spec.ScaleTargetRef
	v, ok := h.Annotations[evacuation.SurgeBoundsAnnotation]
	if !ok || h.Namespace != d.Namespace || ref.Kind != "Deployment" || ref.Name != d.Name {
		return 0, false
	}
	var bounds struct {
		UID        types.UID `json:"uid"`
		Deployment string    `json:"deployment"`
		Surge      *struct {
			OriginalReplicas int32 `json:"originalReplicas"`
			Surge            int32 `json:"surge"`
		} `json:"surge"`
	}
	if json.Unmarshal([]byte(v), &bounds) != nil || bounds.Surge == nil || bounds.Deployment != d.Name ||
		(bounds.UID != "" && bounds.UID != h.UID) {
		return 0, false
	}
	surged := bounds.Surge.OriginalReplicas + bounds.Surge.Surge
	return bounds.Surge.OriginalReplicas, ptr.Deref(d.Spec.Replicas, 1) == surged && bounds.Surge.Surge > 0
}

// userReplicas is the Deployment's replicas without the surge its own record names.
func userReplicas(d *appsv1.Deployment) int32 {
	if v, ok := d.Annotations[evacuation.SurgeAnnotation]; ok {
		var surge struct {
			OriginalReplicas *int32 `json:"originalReplicas"`
		}
		if json.Unmarshal([]byte(v), &surge) == nil && surge.OriginalReplicas != nil {
			return *surge.OriginalReplicas
		}
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}
