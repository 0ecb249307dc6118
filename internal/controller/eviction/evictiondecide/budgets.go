package evictiondecide

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	labelsel "k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"
)

// The imperative evictor's retries are paced by the PodDisruptionBudgets that refused them: a
// refused eviction is tried again as soon as the budgets' status changed since the refusal and now
// allows the pod's eviction, and not while their status does not allow it (the API server decides
// from that status: it would refuse again). The exponential back-off remains for the other
// refusals and where no budget is seen. A StatefulSet whose budget lets one pod go
// at a time thus loses no time between its pods, where the back-off alone overshoots the moment
// the budget allows the next one (1s, 2s, 4s, ... 16s, 32s), and no eviction is sent only to be
// refused.

// SelectBudgets returns the budgets among pdbs (of the pod's namespace) whose selector matches
// the pod. A budget without a selector, or with an invalid one, selects nothing.
func SelectBudgets(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) []policyv1.PodDisruptionBudget {
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labelsel.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}

// BudgetsVersion identifies the budgets' state (their names and resource versions, in name
// order): the imperative evictor records it with a refused eviction and retries early once it
// changed. "" for no budgets.
func BudgetsVersion(budgets []policyv1.PodDisruptionBudget) string {
	parts := make([]string, 0, len(budgets))
	for _, b := range budgets {
		parts = append(parts, b.Name+"="+b.ResourceVersion)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// budgetsAllow reports whether every budget, as its status says, lets the API server evict the
// pod now, as the eviction subresource decides: a pending pod's eviction ignores budgets; else the
// budget's status is of its current spec, and it allows a disruption, or the pod is not Ready and
// the budget's unhealthyPodEvictionPolicy lets such a pod go (AlwaysAllow, or IfHealthyBudget with
// the healthy pods at the desired count). False without budgets: nothing says the budgets changed.
func budgetsAllow(pod *corev1.Pod, budgets []policyv1.PodDisruptionBudget) bool {
	if len(budgets) == 0 {
		return false
	}
	if pod.Status.Phase == corev1.PodPending {
		return true
	}
	for _, b := range budgets {
		if b.Status.ObservedGeneration < b.Generation {
			return false
		}
		if b.Status.DisruptionsAllowed > 0 {
			continue
		}
		if podutils.IsPodReady(pod) {
			return false
		}
		policy := policyv1.IfHealthyBudget
		if b.Spec.UnhealthyPodEvictionPolicy != nil {
			policy = *b.Spec.UnhealthyPodEvictionPolicy
		}
		if policy != policyv1.AlwaysAllow && b.Status.CurrentHealthy < b.Status.DesiredHealthy {
			return false
		}
	}
	return true
}

// heldByBudgets: a budget refused the pod's last eviction and the budgets' status as read does not
// allow it (the API server decides from that status; a status newer than the one read comes with
// its change). Where it does allow it, the refusal was of something else: the back-off decides.
func heldByBudgets(obs Observation, pod *corev1.Pod) bool {
	return obs.EvictMessage != "" && obs.EvictBudgetRefused && len(obs.Budgets) > 0 && !budgetsAllow(pod, obs.Budgets)
}

// retryNow: the pod's last eviction was refused under budgets that have changed since, and that
// now allow it.
func retryNow(obs Observation, pod *corev1.Pod) bool {
	return obs.EvictMessage != "" && BudgetsVersion(obs.Budgets) != obs.EvictBudgets && budgetsAllow(pod, obs.Budgets)
}
