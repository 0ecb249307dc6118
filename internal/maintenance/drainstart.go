package maintenance

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// DrainStart is when one maintenance's drain started on one node, as the node's annotation
// nodemaint.dev/drain-started records it: the node was cordoned for that drain and its pods
// asked to move from then on. The maintenance's metadata.generation and UID at that moment go
// with it, so that the record vouches only for the maintenance as it was then (Vouches).
type DrainStart struct {
	Start      time.Time `json:"start"`
	Generation int64     `json:"generation"`
	UID        types.UID `json:"uid,omitempty"`
}

// Vouches reports whether the record still stands for the maintenance: the same object (UID),
// unchanged since the record was written (metadata.generation).
//
// The controller is crash-only and may miss any number of changes of a maintenance while it is
// down (or between two looks of its cache): a drain switched off and on again, a drainTimeout
// shortened, the maintenance deleted and created again under the same name. A record cannot
// tell such a change from a harmless one, so any change of the spec restarts the node's clock:
// for a deadline after which pods are deleted past their budgets, starting later is the safe
// direction. The price is that editing a draining maintenance (its reason, say) gives each of
// its nodes a full drainTimeout again.
func (r DrainStart) Vouches(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return r.UID == nm.UID && r.Generation == nm.Generation
}

// ParseDrainStarts reads the node annotation nodemaint.dev/drain-started, by maintenance name.
// A value that does not parse vouches for nothing: every clock starts again.
func ParseDrainStarts(value string) map[string]DrainStart {
	if value == "" {
		return nil
	}
	var out map[string]DrainStart
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil
	}
	return out
}

// FormatDrainStarts renders the annotation's value ("" for none). encoding/json sorts the keys,
// so the same records always give the same value.
func FormatDrainStarts(starts map[string]DrainStart) string {
	if len(starts) == 0 {
		return ""
	}
	b, err := json.Marshal(starts)
	if err != nil {
		return ""
	}
	return string(b)
}

// DrainStarts are the records the node should carry: one per maintenance that drains the node
// (drains: its phase on the node drains, see Drains), kept from recorded when it vouches for the
// maintenance (Vouches), else starting at now, rounded up to the second as the annotation keeps
// it (rounded up, the recorded start is never before the drain's).
func DrainStarts(recorded map[string]DrainStart, nms []*nodemaintv1alpha1.NodeMaintenance, drains func(*nodemaintv1alpha1.NodeMaintenance) bool, now time.Time) map[string]DrainStart {
	var out map[string]DrainStart
	for _, nm := range nms {
		if !drains(nm) {
			continue
		}
		if out == nil {
			out = map[string]DrainStart{}
		}
		if r, ok := recorded[nm.Name]; ok && r.Vouches(nm) {
			out[nm.Name] = r
			continue
		}
		start := now.Truncate(time.Second)
		if start.Before(now) {
			start = start.Add(time.Second)
		}
		out[nm.Name] = DrainStart{Start: start.UTC(), Generation: nm.Generation, UID: nm.UID}
	}
	return out
}

// NodeDrainDeadline is when the maintenance's drain on a node times out, counted from the node's
// own drain start (DrainStarts); zero without drainTimeout or when the spec is not usable.
func NodeDrainDeadline(nm *nodemaintv1alpha1.NodeMaintenance, start DrainStart) time.Time {
	if nm.Spec.DrainTimeout == nil || !Usable(nm) || start.Start.IsZero() {
		return time.Time{}
	}
	return start.Start.Add(nm.Spec.DrainTimeout.Duration)
}

// ResponseTimeout is the maintenance's evacuationResponseTimeout, or the default.
func ResponseTimeout(nm *nodemaintv1alpha1.NodeMaintenance) time.Duration {
	if nm.Spec.EvacuationResponseTimeout != nil {
		return nm.Spec.EvacuationResponseTimeout.Duration
	}
	return DefaultResponseTimeout
}

// Deletes reports whether the maintenance may delete pods past their budgets at all: usable,
// not signal-only, with drainTimeoutAction Delete and a drainTimeout.
func Deletes(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return Usable(nm) && nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly &&
		nm.Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete && nm.Spec.DrainTimeout != nil
}

// Evicts reports whether the maintenance evicts pods whose owners do not answer: usable and not
// signal-only.
func Evicts(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return Usable(nm) && nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly
}
