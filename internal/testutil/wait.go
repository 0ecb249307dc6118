package testutil

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 100ms until it reports done, and fails the test when the timeout
// passes first, with the state cond described last (or its last error). Errors do not stop the
// polling: they may be transient. It is the one wait on evidence of every test, unit,
// integration and end-to-end (test/e2e/framework's included); what says what is awaited.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var last string
	var lastErr error
	// Not t.Context(): it is canceled before cleanups run, and cleanups wait too.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := cond(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last, lastErr = state, nil
		return done, nil
	})
	if err != nil {
		t.Fatalf("%s: not after %v; last seen: %s (last error: %v)", what, timeout, last, lastErr)
	}
}
