package drain

import (
	"testing"
	"time"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// What Blocked says of terminating pods changes by itself every terminatingStep: the decision
// that reports it looks again when it next changes, and never for other pods.
func TestBlockedChangesIn(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	terminating := func(ago time.Duration) Verdict {
		return Verdict{Reason: nodemaintv1alpha1.BlockedReasonTerminating, Since: now.Add(-ago)}
	}
	for _, tc := range []struct {
		name    string
		current []Verdict
		want    time.Duration
	}{
		{"none terminating", []Verdict{{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner}}, 0},
		{"terminating since an unknown time", []Verdict{{Reason: nodemaintv1alpha1.BlockedReasonTerminating}}, 0},
		{"just deleted", []Verdict{terminating(0)}, 10 * time.Second},
		{"3s ago", []Verdict{terminating(3 * time.Second)}, 7 * time.Second},
		{"the longest counts", []Verdict{terminating(3 * time.Second), terminating(24 * time.Second)}, 6 * time.Second},
		{"at a step", []Verdict{terminating(30 * time.Second)}, 10 * time.Second},
	} {
		if got := BlockedChangesIn(tc.current, now); got != tc.want {
			t.Errorf("%s: changes in %v, want %v", tc.name, got, tc.want)
		}
	}
	// The message changes exactly then.
	current := []Verdict{terminating(24 * time.Second)}
	plan := Plan{Current: []Classified{{Pod: pod(nil)}}}
	at := func(d time.Duration) string { return Blocked(plan, current, now.Add(d))[0].Message }
	wait := BlockedChangesIn(current, now)
	if before, after := at(wait-time.Millisecond), at(wait); before == after {
		t.Errorf("the message %q does not change after %v", before, wait)
	}
	if now, before := at(0), at(wait-time.Millisecond); now != before {
		t.Errorf("the message changes from %q to %q before %v", now, before, wait)
	}
}
