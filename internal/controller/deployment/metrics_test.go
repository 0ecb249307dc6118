package deployment

import (
	"testing"
	"time"
)

// TestAnswerLatency: the latency of an answer is counted from the request, for the first answer
// only.
func TestAnswerLatency(t *testing.T) {
	if got, ok := answerLatency(pod("a", requested(2)), now); !ok || got != 2*time.Minute {
		t.Errorf("first answer to a request 2 minutes old: %v %t, want 2m true", got, ok)
	}
	if got, ok := answerLatency(pod("a", requested(2), accepted), now); ok {
		t.Errorf("second answer: %v %t, want none", got, ok)
	}
	if got, ok := answerLatency(pod("a"), now); ok {
		t.Errorf("no request: %v %t, want none", got, ok)
	}
}
