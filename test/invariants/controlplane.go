package invariants

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// KindControlPlaneTogether: two control-plane nodes (label node-role.kubernetes.io/control-plane)
// cordoned for one NodeMaintenance at once (each unschedulable, its nodemaint.dev/maintenances
// annotation giving the maintenance a phase that cordons): a rollout takes control-plane nodes
// one at a time, and a maintenance without a rollout that selects several is refused
// (EtcdQuorumAtRisk) and cordons none. Judged from the nodes alone, on every node event.
const KindControlPlaneTogether = "ControlPlaneTogether"

// controlPlane records which maintenances cordon the control-plane node now, and reports a
// maintenance that cordons another control-plane node as well.
func (s *state) controlPlane(node *corev1.Node, deleted bool, now time.Time) {
	if s.controlPlanes == nil {
		s.controlPlanes = map[string][]string{}
	}
	if _, ok := node.Labels[nodemaintv1alpha1.ControlPlaneLabel]; !ok || deleted || !node.Spec.Unschedulable {
		delete(s.controlPlanes, node.Name)
		return
	}
	var cordoning []string
	for _, e := range maintenance.ParseEntries(node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]) {
		if maintenance.Cordons(e.Phase) {
			cordoning = append(cordoning, e.Name)
		}
	}
	was := s.controlPlanes[node.Name]
	s.controlPlanes[node.Name] = cordoning
	for _, nm := range cordoning {
		if slices.Contains(was, nm) {
			continue // reported when it began, if at all
		}
		for other, nms := range s.controlPlanes {
			if other != node.Name && slices.Contains(nms, nm) {
				s.report(Violation{Time: now, Kind: KindControlPlaneTogether, Object: "NodeMaintenance " + nm,
					Detail: fmt.Sprintf("control-plane node %s cordoned for it while control-plane node %s is", node.Name, other)})
			}
		}
	}
}
