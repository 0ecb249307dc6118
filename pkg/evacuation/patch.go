package evacuation

import (
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every patch of a pod built here applies to one pod only, the one its caller observed: it
// carries the pod's metadata.uid, which kube-apiserver refuses to change (a pod deleted and
// created again under the same name, a StatefulSet's, is another pod: the patch fails with 422
// Invalid instead of writing to it). A requester's patches (ConditionPatch, RemoveConditionPatch)
// also carry the observed metadata.resourceVersion: they apply only to the pod as observed, so
// a request never overwrites, and a withdrawal never removes, a condition someone else wrote
// after the read (409 Conflict). Stale reports both refusals: the write was decided from a stale
// read, to be dropped and looked at again, never retried blind.

// ConditionPatch is the strategic merge patch of the pod's status that sets cond and nothing else,
// and only on the pod as observed (its UID and resourceVersion; see above): pod conditions merge
// by type, so the others stay as they are on the server. It is built from the condition alone,
// not diffed from two copies of the whole pod as client.StrategicMergeFrom does (which marshals
// both and walks them: a share of the controller's CPU that grows with the pods' size).
func ConditionPatch(pod *corev1.Pod, cond corev1.PodCondition) client.Patch {
	return statusPatch(observed(pod), cond, nil)
}

// RemoveConditionPatch is the strategic merge patch of the pod's status that removes its condition
// of type t, leaving the others, and only from the pod as observed (its UID and resourceVersion):
// what it removes is the condition the caller saw, a requester's own, not one another requester
// set since.
func RemoveConditionPatch(pod *corev1.Pod, t corev1.PodConditionType) client.Patch {
	return statusPatch(observed(pod), deleteCondition(t), nil)
}

// deleteCondition is the entry of a strategic merge patch's conditions that removes the
// condition of type t.
func deleteCondition(t corev1.PodConditionType) any {
	return struct {
		Type  corev1.PodConditionType `json:"type"`
		Patch string                  `json:"$patch"`
	}{t, "delete"}
}

// AnnotationsPatch is the merge patch of an object's metadata that sets the annotations (a nil
// value removes one) and nothing else, on the object with that UID only (see above).
func AnnotationsPatch(uid types.UID, annotations map[string]*string) client.Patch {
	return rawPatch(types.MergePatchType, patchBody{Metadata: &patchMetadata{UID: uid, Annotations: annotations}})
}

// Stale reports whether a write built here was refused because it was decided from a stale read
// of the pod: another pod has its name now (422 on metadata.uid), it changed since the read (409,
// a resourceVersion precondition), or it is gone (404).
func Stale(err error) bool {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return true
	}
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// patchMetadata is what a patch built here writes of, or requires of, a pod's metadata.
type patchMetadata struct {
	// UID is a precondition: kube-apiserver refuses a change of it.
	UID types.UID `json:"uid,omitempty"`
	// ResourceVersion, when set, is an optimistic lock.
	ResourceVersion string             `json:"resourceVersion,omitempty"`
	Annotations     map[string]*string `json:"annotations,omitempty"`
}

type patchBody struct {
	Metadata *patchMetadata `json:"metadata,omitempty"`
	Status   *struct {
		Conditions [1]any `json:"conditions"`
	} `json:"status,omitempty"`
}

// observed are the preconditions of a requester's write: the pod as observed.
func observed(pod *corev1.Pod) metav1.ObjectMeta {
	return metav1.ObjectMeta{UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

// statusPatch is the strategic merge patch of a pod's status with one entry of its conditions
// and, when any, annotations of its metadata (a nil value removes one), with the preconditions
// of meta (its UID, and its resourceVersion when set).
func statusPatch(meta metav1.ObjectMeta, entry any, annotations map[string]*string) client.Patch {
	p := patchBody{Metadata: &patchMetadata{UID: meta.UID, ResourceVersion: meta.ResourceVersion, Annotations: annotations}}
	p.Status = &struct {
		Conditions [1]any `json:"conditions"`
	}{}
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
