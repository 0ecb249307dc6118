package alerts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Answer is what the Reader last learned from Prometheus. The Reader replaces it whole; nothing
// in it is changed after.
type Answer struct {
	// Firing are the firing alerts of the last usable answer, sorted (see sortAlerts), and At
	// when that answer was asked for; zero: none yet.
	Firing []Alert
	At     time.Time
	// FailedSince is when the first read failed of those that failed since the last usable
	// answer (zero: the last read gave one); Failure says why the last failed, Unreachable
	// whether it got no answer at all (otherwise its answer was unusable).
	FailedSince time.Time
	Failure     string
	Unreachable bool
	// Asked is when the Reader first asked (zero: it has not started).
	Asked time.Time
	// MaxAge is how old a usable answer may be and still count.
	MaxAge time.Duration
}

// Gate tells, at now, the alerts firing, or why it cannot tell (unknown is not empty): no usable
// answer yet, the last read failed, or the last usable answer is older than MaxAge. A rollout
// that waits on alerts halts on an unknown as on firing alerts: a health gate that cannot be
// read is not open. Fresh is until when a known answer counts (zero when unknown): the gate
// closes then unless a newer answer came. The words are stable while the answer does not
// change, so that a status written from them changes only when the answer does.
func (a Answer) Gate(now time.Time) (firing []Alert, unknown string, fresh time.Time) {
	switch {
	case !a.FailedSince.IsZero():
		what := "Prometheus's answers unusable"
		if a.Unreachable {
			what = "Prometheus unreachable"
		}
		return nil, fmt.Sprintf("%s since %s: %s", what, stamp(a.FailedSince), a.Failure), time.Time{}
	case a.At.IsZero() && a.Asked.IsZero():
		return nil, "no answer from Prometheus yet", time.Time{}
	case a.At.IsZero():
		return nil, "no answer from Prometheus yet, asked at " + stamp(a.Asked), time.Time{}
	case now.Sub(a.At) > a.MaxAge:
		return nil, fmt.Sprintf("Prometheus's last answer, asked at %s, is older than %s: no read finished since", stamp(a.At), a.MaxAge), time.Time{}
	}
	return a.Firing, "", a.At.Add(a.MaxAge)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// same: the two answers gate alike, whatever their time (a usable answer read again with the
// same alerts is no news).
func (a Answer) same(b Answer) bool {
	return a.At.IsZero() == b.At.IsZero() && a.FailedSince.Equal(b.FailedSince) && a.Failure == b.Failure && a.Unreachable == b.Unreachable &&
		slices.EqualFunc(a.Firing, b.Firing, func(x, y Alert) bool { return x.Name == y.Name && maps.Equal(x.Labels, y.Labels) })
}

// sortAlerts orders alerts by name, then labels, so that two answers with the same alerts
// compare equal.
func sortAlerts(alerts []Alert) {
	key := func(a Alert) string {
		var b strings.Builder
		b.WriteString(a.Name)
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			b.WriteString("\x00" + k + "\x00" + a.Labels[k])
		}
		return b.String()
	}
	slices.SortFunc(alerts, func(x, y Alert) int { return strings.Compare(key(x), key(y)) })
}
