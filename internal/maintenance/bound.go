package maintenance

import (
	"cmp"
	"slices"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// MaxMaintenancesPerNode is how many NodeMaintenances act on one node at once. Every maintenance
// that acts on a node is named in the node's annotations (nodemaint.dev/maintenances, and
// nodemaint.dev/drain-started while it drains) and in its conditions, and the cordon is written
// in the same patch as the annotations: without a bound, about 1,000 maintenances overlapping on
// a node passed the API server's 256 KiB limit on a node's annotations, and the node could be
// neither cordoned nor restored any more. With the bound, nodemaint's annotations on a node stay
// under 48 KiB even with names of the longest (253 characters).
//
// Which maintenances act is decided per node (Admit): those the node's annotation already names
// keep their place, then the oldest (creation time, then name). A maintenance past the bound does
// nothing to the node (no cordon, taint, request, eviction or deletion for it), says so in its
// status, and takes its place on the node once one of those acting ends.
const MaxMaintenancesPerNode = 64

// Admit decides which of the maintenances selecting a node act on it: acting are every one that
// asks nothing of the node (present false: its phase there is MaintenanceComplete), and at most
// MaxMaintenancesPerNode of the others; beyond are the others, in the order they will act.
//
// The maintenances recorded on the node (its annotation's entries, ParseEntries) come first, so
// that a maintenance acting on a node is never displaced by one that comes to select it later;
// then the oldest by creation time, then by name. Which maintenances act does not depend on the
// order nms are listed in.
func Admit(nms []*nodemaintv1alpha1.NodeMaintenance, recorded []NodeEntry, present func(*nodemaintv1alpha1.NodeMaintenance) bool) (acting, beyond []*nodemaintv1alpha1.NodeMaintenance) {
	return admit(nms, recorded, present, MaxMaintenancesPerNode)
}

func admit(nms []*nodemaintv1alpha1.NodeMaintenance, recorded []NodeEntry, present func(*nodemaintv1alpha1.NodeMaintenance) bool, most int) (acting, beyond []*nodemaintv1alpha1.NodeMaintenance) {
	onNode := make(map[string]bool, len(recorded))
	for _, e := range recorded {
		onNode[e.Name] = true
	}
	var candidates []*nodemaintv1alpha1.NodeMaintenance
	for _, nm := range nms {
		if present(nm) {
			candidates = append(candidates, nm)
		} else {
			acting = append(acting, nm)
		}
	}
	if len(candidates) <= most {
		return append(acting, candidates...), nil
	}
	slices.SortFunc(candidates, func(a, b *nodemaintv1alpha1.NodeMaintenance) int {
		if onNode[a.Name] != onNode[b.Name] {
			if onNode[a.Name] {
				return -1
			}
			return 1
		}
		return Older(a, b)
	})
	return append(acting, candidates[:most]...), candidates[most:]
}

// Older orders maintenances by creation time, then by name: negative when a comes first.
func Older(a, b *nodemaintv1alpha1.NodeMaintenance) int {
	if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
