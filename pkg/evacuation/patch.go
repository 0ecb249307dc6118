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
	return statusConditionsPatch(deleteCondition(t))
}

// deleteCondition is the entry of a strategic merge patch's conditions that removes the
// condition of type t.
func deleteCondition(t corev1.PodConditionType) any {
	return struct {
		Type  corev1.PodConditionType `json:"type"`
		Patch string                  `json:"$patch"`
	}{t, "delete"}
}

func statusConditionsPatch(entry any) client.Patch {
	return statusPatch(entry, nil)
}

// AnnotationsPatch is the merge patch of an object's metadata that sets the annotations (a nil
// value removes one) and nothing else.
func AnnotationsPatch(annotations map[string]*string) client.Patch {
	var p struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	p.Metadata.Annotations = annotations
	return rawPatch(types.MergePatchType, p)
}

// statusPatch is the strategic merge patch of a pod's status with one entry of its conditions
// and, when any, annotations of its metadata (a nil value removes one).
func statusPatch(entry any, annotations map[string]*string) client.Patch {
	type metadata struct {
		Annotations map[string]*string `json:"annotations"`
	}
	var p struct {
		Metadata *metadata `json:"metadata,omitempty"`
		Status   struct {
			Conditions [1]any `json:"conditions"`
		} `json:"status"`
	}
	if len(annotations) > 0 {
		p.Metadata = &metadata{Annotations: annotations}
	}
	p.Status.Conditions[0] = entry
	return rawPatch(types.StrategicMergePatchType, p)
}

func rawPatch(pt types.PatchType, p any) client.Patch {
	data, err := json.Marshal(p)
	if err != nil {
		// A PodCondition always marshals.
		panic(err)
	}
	return client.RawPatch(pt, data)
}
