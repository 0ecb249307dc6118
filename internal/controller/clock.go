package controller

import "k8s.io/utils/clock"

// clockOrReal is c, or the real clock when c is nil: the reconcilers' Clock is optional.
func clockOrReal(c clock.PassiveClock) clock.PassiveClock {
	if c == nil {
		return clock.RealClock{}
	}
	return c
}
