package rollout

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// WindowState is whether the maintenance window is open at a moment, and when that changes:
// when it closes if it is open, when it opens next if it is not (zero: never).
type WindowState struct {
	Open bool
	Next time.Time
}

// Window is a parsed maintenance window.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseWindow parses a maintenance window: its five-field cron schedule read in its time zone
// (UTC when empty), open for its duration from each time the schedule fires.
func ParseWindow(w *nodemaintv1alpha1.MaintenanceWindow) (*Window, error) {
	loc := time.UTC
	if w.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			return nil, fmt.Errorf("spec.rollout.window.timeZone: %q is not a time zone: %w", w.TimeZone, err)
		}
	}
	s, err := parser.Parse("CRON_TZ=" + loc.String() + " " + w.Schedule)
	if err != nil {
		return nil, fmt.Errorf("spec.rollout.window.schedule: %q: %w", w.Schedule, err)
	}
	if !w.Duration.Valid() || w.Duration.Duration <= 0 {
		return nil, fmt.Errorf("spec.rollout.window.duration: %q is not a positive duration", w.Duration.Raw())
	}
	return &Window{schedule: s, duration: w.Duration.Duration}, nil
}

// maxSteps bounds the walk over the schedule's firings (a schedule firing every minute, with a
// window of a week, takes 10,080).
const maxSteps = 20000

// At says whether the window is open at now: whether the schedule fired within the duration
// before it. Overlapping windows join.
func (w *Window) At(now time.Time) WindowState {
	first := w.schedule.Next(now.Add(-w.duration))
	if first.IsZero() {
		return WindowState{}
	}
	if first.After(now) {
		return WindowState{Next: first}
	}
	end := first.Add(w.duration)
	for i := 0; i < maxSteps; i++ {
		next := w.schedule.Next(first)
		if next.IsZero() || next.After(end) {
			break
		}
		first, end = next, next.Add(w.duration)
	}
	return WindowState{Open: true, Next: end}
}
