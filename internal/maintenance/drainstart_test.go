package maintenance

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestDrainStarts: a node's record of a maintenance's drain start stands only while it vouches
// for the maintenance as it is (same UID, same generation); a maintenance changed in any way, or
// deleted and created again under the same name, starts the node's clock again; a maintenance
// that no longer drains the node loses its record; a new start is rounded up to the second.
func TestDrainStarts(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 400_000_000, time.UTC)
	old := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	mk := func(name string, uid string, gen int64) *nodemaintv1alpha1.NodeMaintenance {
		return &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("u-" + uid), Generation: gen}}
	}
	same, changed, recreated, stopped, fresh := mk("same", "1", 2), mk("changed", "2", 3), mk("recreated", "new", 2), mk("stopped", "4", 1), mk("fresh", "5", 1)
	recorded := ParseDrainStarts(FormatDrainStarts(map[string]DrainStart{
		"same":      {Start: old, Generation: 2, UID: "u-1"},
		"changed":   {Start: old, Generation: 2, UID: "u-2"}, // drain switched off and on while nobody looked
		"recreated": {Start: old, Generation: 2, UID: "u-old"},
		"stopped":   {Start: old, Generation: 1, UID: "u-4"},
		"gone":      {Start: old, Generation: 1, UID: "u-9"},
	}))
	if len(recorded) != 5 {
		t.Fatalf("round trip: %v", recorded)
	}
	drains := func(nm *nodemaintv1alpha1.NodeMaintenance) bool { return nm != stopped }
	got := DrainStarts(recorded, []*nodemaintv1alpha1.NodeMaintenance{same, changed, recreated, stopped, fresh}, drains, now)
	rounded := time.Date(2026, 1, 1, 12, 0, 1, 0, time.UTC)
	want := map[string]DrainStart{
		"same":      {Start: old, Generation: 2, UID: "u-1"},
		"changed":   {Start: rounded, Generation: 3, UID: "u-2"},
		"recreated": {Start: rounded, Generation: 2, UID: "u-new"},
		"fresh":     {Start: rounded, Generation: 1, UID: "u-5"},
	}
	if FormatDrainStarts(got) != FormatDrainStarts(want) {
		t.Fatalf("starts\n%s\nwant\n%s", FormatDrainStarts(got), FormatDrainStarts(want))
	}
	// Written and read back, the records are kept as they are (the next look changes nothing).
	if again := DrainStarts(ParseDrainStarts(FormatDrainStarts(got)), []*nodemaintv1alpha1.NodeMaintenance{same, changed, recreated, stopped, fresh}, drains, now.Add(time.Minute)); FormatDrainStarts(again) != FormatDrainStarts(got) {
		t.Fatalf("not stable: %s", FormatDrainStarts(again))
	}
	// A value that does not parse vouches for nothing.
	if r := ParseDrainStarts(`{"same":`); r != nil {
		t.Fatalf("malformed value parsed: %v", r)
	}
	if s := DrainStarts(nil, []*nodemaintv1alpha1.NodeMaintenance{stopped}, drains, now); FormatDrainStarts(s) != "" {
		t.Fatalf("records for no drain: %v", s)
	}

	// The node's deadline counts from its own start.
	nm := mk("d", "1", 1)
	nm.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: 10 * time.Minute}
	if got := NodeDrainDeadline(nm, DrainStart{Start: old}); !got.Equal(old.Add(10 * time.Minute)) {
		t.Fatalf("deadline %v", got)
	}
	if got := NodeDrainDeadline(nm, DrainStart{}); !got.IsZero() {
		t.Fatalf("deadline without a start: %v", got)
	}
}
