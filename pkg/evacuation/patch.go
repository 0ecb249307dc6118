package evacuation

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConditionPatch is the strategic merge patch of a pod's status that sets cond and nothing else:
// pod conditions merge by type, so the others stay as they are on the server. It is built from
// the condition alone, not diffed from two copies of the whole pod as client.StrategicMergeFrom
// does (which marshals both and walks them: a share of the controller's CPU that grows with the
// pods' size).
func ConditionPatch(cond corev1.PodCondition) client.Patch {
	return statusConditionsPatch(cond)
}

// RemoveConditionPatch is the strategic merge patch of a pod's status that removes its condition
// of type t, leaving the others.
func RemoveConditionPatch(t corev1.PodConditionType) client.Patch {
	return statusConditionsPatch(struct {
		Type  corev1.PodConditionType `json:"type"`
		Patch string                  `json:"$patch"`
	}{t, "delete"})
}

func statusConditionsPatch(entry any) client.Patch {
	var p struct {
		Status struct {
			Conditions [1]any `json:"conditions"`
		} `json:"status"`
	}
	p.Status.Conditions[0] = entry
	data, err := json.Marshal(p)
	if err != nil {
		// A PodCondition always marshals.
		panic(err)
	}
	return client.RawPatch(types.StrategicMergePatchType, data)
}
