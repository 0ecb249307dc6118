package nodemaintenancedecide

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// setSpecValid reports on the maintenance's own status a spec the controller cannot use (stored
// before the API server refused it): SpecValid False naming the fields and their values, removed
// once the spec is fixed. The maintenance then does nothing destructive (maintenance.Usable).
func setSpecValid(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus, now time.Time) {
	var parts []string
	if problems := nm.Spec.Problems(); len(problems) > 0 {
		parts = append(parts, strings.Join(problems, "; ")+
			"; until it is fixed, nodemaint only cordons and requests evacuation: it evicts, deletes and taints nothing for this maintenance")
	}
	if r := nm.Spec.Rollout; r != nil && r.SoakTime != nil && (!r.SoakTime.Valid() || r.SoakTime.Duration < 0 || r.SoakTime.Duration > nodemaintv1alpha1.MaxSoakTime) {
		parts = append(parts, fmt.Sprintf("spec.rollout.soakTime: %q is not a duration between 0s and 24h; until it is fixed, the rollout soaks 24h after each node", r.SoakTime.Raw()))
	}
	if r := nm.Spec.Rollout; r != nil && r.Window != nil {
		if _, err := rollout.ParseWindow(r.Window); err != nil {
			parts = append(parts, err.Error()+"; until it is fixed, no node starts its turn")
		}
	}
	if len(parts) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionSpecValid)
		return
	}
	setCondition(&status.Conditions, metav1.Condition{
		Type: nodemaintv1alpha1.ConditionSpecValid, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonInvalidSpec,
		ObservedGeneration: nm.Generation, Message: strings.Join(parts, "; "),
	}, now)
}
