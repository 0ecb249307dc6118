package controller

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
)

// The status of a NodeMaintenance stays far below etcd's limit on an object (1.5 MiB) whatever
// the number of nodes it selects: it counts every selected node in its totals, but details at
// most MaxStatusNodes nodes within MaxStatusNodesBytes, those with the most to report.

// nodeReport is the status of one selected node, before status.nodes is bounded.
type nodeReport struct {
	name   string
	status nodemaintv1alpha1.NodeMaintenanceNodeStatus
}

// worthListing reports whether the node has something to report: pods left (targeted or
// skipped), volumes attached, or the out-of-service taint.
func (r *nodeReport) worthListing() bool {
	s := &r.status
	return s.PodsPendingEvacuation > 0 || s.PodsSkipped > 0 || s.VolumesAttached > 0 || s.OutOfService || len(s.Blocked) > 0
}

// listNodes chooses the nodes status.nodes details: of those worth listing, the ones with the most
// pods pending, then the most volumes attached, then the most pods skipped, then by name; at most
// maxNodes of them, and as many as fit in maxBytes of JSON. It returns them with the number of
// nodes worth listing that are left out.
func listNodes(reports []nodeReport, maxNodes, maxBytes int) (map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus, int32) {
	var candidates []*nodeReport
	for i := range reports {
		if reports[i].worthListing() {
			candidates = append(candidates, &reports[i])
		}
	}
	if len(candidates) == 0 {
		return nil, 0
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := &candidates[i].status, &candidates[j].status
		switch {
		case a.PodsPendingEvacuation != b.PodsPendingEvacuation:
			return a.PodsPendingEvacuation > b.PodsPendingEvacuation
		case a.VolumesAttached != b.VolumesAttached:
			return a.VolumesAttached > b.VolumesAttached
		case a.PodsSkipped != b.PodsSkipped:
			return a.PodsSkipped > b.PodsSkipped
		}
		return candidates[i].name < candidates[j].name
	})
	listed := make(map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus, min(len(candidates), maxNodes))
	size := len(`{}`)
	for _, c := range candidates {
		if len(listed) == maxNodes {
			break
		}
		entry, err := json.Marshal(map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus{c.name: c.status})
		if err != nil {
			break
		}
		// The entry without its braces, and a comma.
		if size+len(entry)-1 > maxBytes {
			break
		}
		size += len(entry) - 1
		listed[c.name] = c.status
	}
	notListed := int32(len(candidates) - len(listed))
	if len(listed) == 0 {
		return nil, notListed // as the API server returns it, so that the status compares equal
	}
	return listed, notListed
}

// boundBlocked cuts the messages of blocked entries to the CRD's limit: an eviction's error or an
// owner's message may be of any length, and one too long would fail the whole status write.
func boundBlocked(blocked []nodemaintv1alpha1.BlockedPods) []nodemaintv1alpha1.BlockedPods {
	for i := range blocked {
		blocked[i].Message = cut(blocked[i].Message, nodemaintv1alpha1.MaxBlockedMessageLength)
	}
	return blocked
}

// cut shortens s to at most n bytes (and so n characters), at a character boundary, marking the
// cut with an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	end := n - len(ellipsis)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ellipsis
}

// maxSkippedNames is how many skipped pods the Drained condition names.
const maxSkippedNames = 5

// skippedPods gathers a few of the pods the drain skips, with what skipped them, in the order
// they are added.
type skippedPods struct {
	names []string
}

func (s *skippedPods) add(plan drain.Plan) {
	for _, c := range plan.Skipped {
		if len(s.names) == maxSkippedNames {
			return
		}
		s.names = append(s.names, fmt.Sprintf("%s/%s (%s)", c.Pod.Namespace, c.Pod.Name, c.Class.Source))
	}
}

// note says how many pods are skipped and names a few: "; 2 pods skipped and left running: ns/a
// (label nodemaint.dev/drain=skip), ns/b (DrainRule keep-logs)". It is empty when none is.
func (s *skippedPods) note(total int32) string {
	if total == 0 {
		return ""
	}
	note := fmt.Sprintf("; %d pods skipped and left running: %s", total, strings.Join(s.names, ", "))
	if more := int(total) - len(s.names); more > 0 {
		note += fmt.Sprintf(" and %d more", more)
	}
	return note
}
