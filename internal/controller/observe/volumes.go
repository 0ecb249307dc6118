package observe

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=volumeattachments,verbs=get;list;watch

// attachedVolumes counts the volumes attached to the node that no pod still on it uses: the
// volumes of drained pods, not yet detached. Volumes of pods left on the node (skipped,
// DaemonSet) do not count. It looks at the cluster's VolumeAttachments (CSI, vas) and
// node.status.volumesAttached.
func attachedVolumes(ctx context.Context, c client.Reader, node *corev1.Node, pods []*corev1.Pod, vas []storagev1.VolumeAttachment) (int, error) {
	inUsePVs := map[string]bool{}
	inUseNames := map[string]bool{}
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{}
			err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc)
			if client.IgnoreNotFound(err) != nil {
				return 0, err
			}
			if pvc.Spec.VolumeName == "" {
				continue
			}
			inUsePVs[pvc.Spec.VolumeName] = true
			pv := &corev1.PersistentVolume{}
			if err := c.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); client.IgnoreNotFound(err) != nil {
				return 0, err
			}
			if pv.Spec.CSI != nil {
				inUseNames["kubernetes.io/csi/"+pv.Spec.CSI.Driver+"^"+pv.Spec.CSI.VolumeHandle] = true
			}
		}
	}
	attached := map[string]bool{}
	for _, v := range node.Status.VolumesAttached {
		if !inUseNames[string(v.Name)] {
			attached[string(v.Name)] = true
		}
	}
	for _, va := range vas {
		pv := va.Spec.Source.PersistentVolumeName
		if va.Spec.NodeName != node.Name || !va.Status.Attached && va.DeletionTimestamp != nil || pv != nil && inUsePVs[*pv] {
			continue
		}
		// The same volume shows in node.status.volumesAttached under its unique name.
		key := "va/" + va.Name
		if pv != nil {
			obj := &corev1.PersistentVolume{}
			if err := c.Get(ctx, types.NamespacedName{Name: *pv}, obj); client.IgnoreNotFound(err) != nil {
				return 0, err
			}
			if obj.Spec.CSI != nil {
				key = "kubernetes.io/csi/" + obj.Spec.CSI.Driver + "^" + obj.Spec.CSI.VolumeHandle
			}
		}
		attached[key] = true
	}
	return len(attached), nil
}
