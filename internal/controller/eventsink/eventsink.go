// Package eventsink records the controllers' Events with their notes cut to what the API server
// takes (few.MaxEventNote): an Event with a longer note is refused, and lost.
package eventsink

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/nodemaint/nodemaint/internal/few"
)

// Sink records Events through its recorder.
type Sink struct{ events.EventRecorder }

// Normal records a Normal Event regarding an object, related to another (or nil).
func (s Sink) Normal(regarding, related runtime.Object, reason, action, note string) {
	s.Eventf(regarding, related, corev1.EventTypeNormal, reason, action, "%s", few.Cut(note, few.MaxEventNote))
}

// Warning records a Warning Event regarding an object, related to another (or nil).
func (s Sink) Warning(regarding, related runtime.Object, reason, action, note string) {
	s.Eventf(regarding, related, corev1.EventTypeWarning, reason, action, "%s", few.Cut(note, few.MaxEventNote))
}
