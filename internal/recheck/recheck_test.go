package recheck

import (
	"testing"
	"time"
)

func TestSoonest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		waits []time.Duration
		want  time.Duration
	}{
		{"none", nil, 0},
		{"zero is none", []time.Duration{0}, 0},
		{"negative is none", []time.Duration{-time.Second}, 0},
		{"one", []time.Duration{time.Second}, time.Second},
		{"zero first", []time.Duration{0, 3 * time.Second}, 3 * time.Second},
		{"zero last", []time.Duration{3 * time.Second, 0}, 3 * time.Second},
		{"negative passed over", []time.Duration{2 * time.Second, -time.Second}, 2 * time.Second},
		{"shortest", []time.Duration{5 * time.Second, time.Second, 3 * time.Second}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Soonest(tc.waits...); got != tc.want {
				t.Errorf("Soonest(%v) = %v, want %v", tc.waits, got, tc.want)
			}
		})
	}
}
