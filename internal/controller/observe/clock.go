package observe

import "k8s.io/utils/clock"

// Clock is c, or the real clock when c is nil: the reconcilers' Clock is optional.
func Clock(c clock.PassiveClock) clock.PassiveClock {
	if c == nil {
		return clock.RealClock{}
	}
	return c
}
