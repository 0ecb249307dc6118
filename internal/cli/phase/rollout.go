package phase

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// rolloutFlags are drain's flags that roll the maintenance through its nodes a few at a time
// (spec.rollout). Each flag given sets its field; a flag not given leaves the field of an
// existing maintenance as it is.
type rolloutFlags struct {
	maxUnavailable  string
	release         string
	onNodeFailure   string
	windowSchedule  string
	windowDuration  time.Duration
	windowTimeZone  string
	soakTime        time.Duration
	maxBlockedNodes int32

	cmd *cobra.Command
}

const (
	flagMaxUnavailable = "max-unavailable"
	flagRelease        = "release"
	flagOnNodeFailure  = "on-node-failure"
	flagWindowSchedule = "window-schedule"
	flagWindowDuration = "window-duration"
	flagWindowTimeZone = "window-time-zone"
	flagSoakTime       = "soak-time"
	flagMaxBlocked     = "max-blocked-nodes"
)

func (f *rolloutFlags) addFlags(cmd *cobra.Command) {
	f.cmd = cmd
	fs := cmd.Flags()
	fs.StringVar(&f.maxUnavailable, flagMaxUnavailable, "", "Roll through the nodes this many at a time: a number, or a percentage of the selected nodes (\"25%\"); without it every node is drained at once")
	fs.StringVar(&f.release, flagRelease, "", "When a node's turn ends and the next starts: drained (default), rebooted (drained, then booted again and Ready), manual (ended by 'kubectl maintenance complete NODE')")
	fs.StringVar(&f.onNodeFailure, flagOnNodeFailure, "", "A node not drained within the NodeMaintenance's spec.drainTimeout: pause (default) halts the rollout, continue releases it as failed and goes on")
	fs.StringVar(&f.windowSchedule, flagWindowSchedule, "", "Nodes start their turn only in a maintenance window opening at this cron schedule (5 fields: minute hour day-of-month month day-of-week, e.g. \"0 22 * * 1-5\")")
	fs.DurationVar(&f.windowDuration, flagWindowDuration, 0, "How long the maintenance window stays open each time (1m to 168h)")
	fs.StringVar(&f.windowTimeZone, flagWindowTimeZone, "", "IANA time zone the window's schedule is read in (e.g. Europe/Berlin; default UTC)")
	fs.DurationVar(&f.soakTime, flagSoakTime, 0, "After a node's turn ends, wait this long before another node starts its turn (0s to 24h)")
	fs.Int32Var(&f.maxBlockedNodes, flagMaxBlocked, 0, "Leave up to this many nodes not drained within spec.drainTimeout cordoned and go on without them (0 to 100; the NodeMaintenance needs a spec.drainTimeout, which the API server checks)")
}

// changed reports whether the flag was given on the command line.
func (f *rolloutFlags) changed(name string) bool {
	return f.cmd != nil && f.cmd.Flags().Changed(name)
}

// given reports whether any rollout flag was given.
func (f *rolloutFlags) given() bool {
	for _, n := range []string{flagMaxUnavailable, flagRelease, flagOnNodeFailure, flagWindowSchedule, flagWindowDuration, flagWindowTimeZone, flagSoakTime, flagMaxBlocked} {
		if f.changed(n) {
			return true
		}
	}
	return false
}

// percent is the form of a percentage maxUnavailable, as the CRD admits it.
var percent = regexp.MustCompile(`^([1-9][0-9]?|100)%$`)

// parseMaxUnavailable parses --max-unavailable as the CRD validates spec.rollout.maxUnavailable.
func parseMaxUnavailable(s string) (*intstr.IntOrString, error) {
	v := intstr.Parse(strings.TrimSpace(s))
	switch {
	case v.Type == intstr.Int && v.IntVal >= 1:
		return &v, nil
	case v.Type == intstr.String && percent.MatchString(v.StrVal):
		return &v, nil
	}
	return nil, fmt.Errorf("--%s %q: want a number of nodes of at least 1, or a percentage from 1%% to 100%%", flagMaxUnavailable, s)
}

func parseRelease(s string) (nodemaintv1alpha1.ReleasePolicy, error) {
	for _, p := range []nodemaintv1alpha1.ReleasePolicy{nodemaintv1alpha1.ReleaseDrained, nodemaintv1alpha1.ReleaseRebooted, nodemaintv1alpha1.ReleaseManual} {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("--%s %q: want drained, rebooted or manual", flagRelease, s)
}

func parseNodeFailure(s string) (nodemaintv1alpha1.NodeFailurePolicy, error) {
	for _, p := range []nodemaintv1alpha1.NodeFailurePolicy{nodemaintv1alpha1.NodeFailurePause, nodemaintv1alpha1.NodeFailureContinue} {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("--%s %q: want pause or continue", flagOnNodeFailure, s)
}

// apply sets the fields of the rollout the flags give, on a copy of current (nil: the
// maintenance has no rollout yet), and checks the result as the controller reads it. Without a
// rollout flag it returns current. A maintenance without a rollout gets one only with
// --max-unavailable: the other flags say how to roll, not whether to.
func (f *rolloutFlags) apply(current *nodemaintv1alpha1.RolloutSpec) (*nodemaintv1alpha1.RolloutSpec, error) {
	if !f.given() {
		return current, nil
	}
	if current == nil && !f.changed(flagMaxUnavailable) {
		var given []string
		for _, n := range []string{flagRelease, flagOnNodeFailure, flagWindowSchedule, flagWindowDuration, flagWindowTimeZone, flagSoakTime, flagMaxBlocked} {
			if f.changed(n) {
				given = append(given, "--"+n)
			}
		}
		return nil, fmt.Errorf("%s: set how many nodes roll at once with --%s", strings.Join(given, ", "), flagMaxUnavailable)
	}
	out := &nodemaintv1alpha1.RolloutSpec{}
	if current != nil {
		out = current.DeepCopy()
	}
	var err error
	if f.changed(flagMaxUnavailable) {
		if out.MaxUnavailable, err = parseMaxUnavailable(f.maxUnavailable); err != nil {
			return nil, err
		}
	}
	if f.changed(flagRelease) {
		if out.Release, err = parseRelease(f.release); err != nil {
			return nil, err
		}
	}
	if f.changed(flagOnNodeFailure) {
		if out.OnNodeFailure, err = parseNodeFailure(f.onNodeFailure); err != nil {
			return nil, err
		}
	}
	if f.changed(flagSoakTime) {
		if f.soakTime < 0 || f.soakTime > nodemaintv1alpha1.MaxSoakTime {
			return nil, fmt.Errorf("--%s %s: want a duration between 0s and 24h", flagSoakTime, f.soakTime)
		}
		out.SoakTime = &nodemaintv1alpha1.Duration{Duration: f.soakTime}
	}
	if f.changed(flagMaxBlocked) {
		if f.maxBlockedNodes < 0 || f.maxBlockedNodes > nodemaintv1alpha1.MaxBlockedNodesMax {
			return nil, fmt.Errorf("--%s %d: want a number from 0 to %d", flagMaxBlocked, f.maxBlockedNodes, nodemaintv1alpha1.MaxBlockedNodesMax)
		}
		out.MaxBlockedNodes = f.maxBlockedNodes
	}
	if f.changed(flagWindowSchedule) || f.changed(flagWindowDuration) || f.changed(flagWindowTimeZone) {
		w := &nodemaintv1alpha1.MaintenanceWindow{}
		if out.Window != nil {
			w = out.Window.DeepCopy()
		}
		if f.changed(flagWindowSchedule) {
			w.Schedule = strings.TrimSpace(f.windowSchedule)
		}
		if f.changed(flagWindowDuration) {
			w.Duration = nodemaintv1alpha1.Duration{Duration: f.windowDuration}
		}
		if f.changed(flagWindowTimeZone) {
			w.TimeZone = strings.TrimSpace(f.windowTimeZone)
		}
		if err := checkWindow(w); err != nil {
			return nil, err
		}
		out.Window = w
	}
	return out, nil
}

// checkWindow refuses a window the controller could not read: the API server checks the
// schedule's five fields and the duration's bounds, not the fields' values or the time zone.
func checkWindow(w *nodemaintv1alpha1.MaintenanceWindow) error {
	switch {
	case w.Schedule == "":
		return fmt.Errorf("a maintenance window needs --%s (with --%s)", flagWindowSchedule, flagWindowDuration)
	case w.Duration.Duration == 0:
		return fmt.Errorf("a maintenance window needs --%s (with --%s)", flagWindowDuration, flagWindowSchedule)
	case len(strings.Fields(w.Schedule)) != 5:
		return fmt.Errorf("--%s %q: want a cron schedule of five fields: minute hour day-of-month month day-of-week", flagWindowSchedule, w.Schedule)
	case w.Duration.Duration < time.Minute || w.Duration.Duration > 168*time.Hour:
		return fmt.Errorf("--%s %s: want a duration between 1m and 168h", flagWindowDuration, w.Duration.Duration)
	}
	_, err := rollout.ParseWindow(w)
	return err
}
