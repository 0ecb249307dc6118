package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Duration is a length of time written as a Go duration string ("90s", "15m", "1h30m"). It is
// metav1.Duration with one difference: decoding never fails. A text Go cannot parse (an object
// stored before the API server validated durations, e.g. "1d") decodes to an invalid Duration that
// keeps the text and writes it back unchanged, so one such object cannot stop the controller's
// informer from listing every other NodeMaintenance. Valid reports whether the text parsed; the
// controller never acts destructively on a NodeMaintenance with an invalid duration
// (see NodeMaintenanceSpec.Problems).
//
// Its schema is a plain string, without format: duration: the API server's duration format admits
// "1d" and "1w", and gives CEL rules a parsed duration; the CEL rules on each field check the text
// against Go's syntax first, so that a refusal names the bounds instead of a CEL error.
//
// +kubebuilder:validation:Type=string
type Duration struct {
	time.Duration `json:"-"`

	// invalid is set when the stored value did not parse; raw is then that value (a JSON string's
	// text, or the raw JSON of anything else).
	invalid bool
	raw     string
}

// Valid reports whether the duration parsed.
func (d *Duration) Valid() bool { return !d.invalid }

// Raw is the duration as written: the stored text of an invalid duration, else its Go form.
func (d *Duration) Raw() string {
	if d.invalid {
		return d.raw
	}
	return d.Duration.String()
}

// UnmarshalJSON implements json.Unmarshaler. It never returns an error: a value that is not a
// duration string is kept as its raw text and marks the Duration invalid.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{invalid: true, raw: string(b)}
		return nil
	}
	pd, err := time.ParseDuration(s)
	if err != nil {
		*d = Duration{invalid: true, raw: s}
		return nil
	}
	*d = Duration{Duration: pd}
	return nil
}

// MarshalJSON implements json.Marshaler: the stored text of an invalid duration, unchanged, else
// the Go form ("1h30m0s").
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.invalid {
		return json.Marshal(d.raw)
	}
	return json.Marshal(d.Duration.String())
}

// ToUnstructured implements runtime.UnstructuredConverter's value form, as metav1.Duration does.
func (d Duration) ToUnstructured() interface{} {
	if d.invalid {
		return d.raw
	}
	return d.Duration.String()
}

// Bounds of the durations of a NodeMaintenance. The CRD's validation rules enforce the same
// figures (kubebuilder markers of NodeMaintenanceSpec and ShutdownSpec).
const (
	MinDuration                  = time.Second
	MaxEvacuationResponseTimeout = 24 * time.Hour
	MaxNotReadyGracePeriod       = 24 * time.Hour
	MaxDrainTimeout              = 168 * time.Hour
	// MinDeleteDrainTimeout is the shortest drainTimeout with drainTimeoutAction Delete; it must
	// also be at least the evacuationResponseTimeout, so every owner had its chance to answer.
	MinDeleteDrainTimeout = 5 * time.Minute
	// DefaultEvacuationResponseTimeout is KEP-4212's time for an owner to answer (the CRD default).
	DefaultEvacuationResponseTimeout = 3 * time.Minute
)

// Bounds of spec.evictionGracePeriodSeconds, in seconds; the CRD's validation rule enforces the
// same. 0 is no grace at all (the pod is killed at once), which nodemaint never asks for.
const (
	MinEvictionGracePeriodSeconds = 1
	MaxEvictionGracePeriodSeconds = 86400
)

// Problems lists the fields of the spec the controller cannot use safely, each naming the field,
// its value and the bound: durations that do not parse or are out of bounds, a Delete
// drainTimeoutAction with a drainTimeout too short, a podSelector that does not parse and an
// evictionGracePeriodSeconds out of bounds. The API server refuses all of them; an object stored
// before it did may still have them. Empty when the spec is usable.
func (s *NodeMaintenanceSpec) Problems() []string {
	var out []string
	check := func(field string, d *Duration, limit time.Duration) {
		switch {
		case d == nil:
		case !d.Valid():
			out = append(out, fmt.Sprintf("%s: %q is not a duration (units h, m, s, ms, us, ns)", field, d.Raw()))
		case d.Duration < MinDuration || d.Duration > limit:
			out = append(out, fmt.Sprintf("%s: %s is not between %s and %s", field, d.Raw(), shortDuration(MinDuration), shortDuration(limit)))
		}
	}
	check("spec.evacuationResponseTimeout", s.EvacuationResponseTimeout, MaxEvacuationResponseTimeout)
	check("spec.drainTimeout", s.DrainTimeout, MaxDrainTimeout)
	if s.Shutdown != nil {
		check("spec.shutdown.notReadyGracePeriod", s.Shutdown.NotReadyGracePeriod, MaxNotReadyGracePeriod)
	}
	if s.DrainTimeoutAction == DrainTimeoutActionDelete && s.DrainTimeout != nil && s.DrainTimeout.Valid() {
		minimum := MinDeleteDrainTimeout
		response := DefaultEvacuationResponseTimeout
		if r := s.EvacuationResponseTimeout; r != nil && r.Valid() {
			response = r.Duration
		}
		if response > minimum {
			minimum = response
		}
		if s.DrainTimeout.Duration < minimum {
			out = append(out, fmt.Sprintf("spec.drainTimeout: %s is shorter than %s; drainTimeoutAction Delete needs at least 5m and at least evacuationResponseTimeout",
				s.DrainTimeout.Raw(), shortDuration(minimum)))
		}
	}
	if s.PodSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.PodSelector); err != nil {
			out = append(out, fmt.Sprintf("spec.podSelector: %v", err))
		}
	}
	if g := s.EvictionGracePeriodSeconds; g != nil && (*g < MinEvictionGracePeriodSeconds || *g > MaxEvictionGracePeriodSeconds) {
		out = append(out, fmt.Sprintf("spec.evictionGracePeriodSeconds: %d is not between %d and %d", *g, MinEvictionGracePeriodSeconds, MaxEvictionGracePeriodSeconds))
	}
	return out
}

// shortDuration writes 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return d.String()
	}
}
