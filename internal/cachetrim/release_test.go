package cachetrim

import (
	"context"
	"runtime"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
)

// TestReleaseStartupMemory: once the caches are filled, the heap the start no longer uses is
// returned to the operating system, not left for the runtime to return gradually.
func TestReleaseStartupMemory(t *testing.T) {
	const garbage = 64 << 20
	keep := make([][]byte, 0, garbage>>20)
	for range garbage >> 20 {
		keep = append(keep, make([]byte, 1<<20))
	}
	for i := range keep {
		keep[i][0] = 1
	}
	keep = nil
	runtime.KeepAlive(keep)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	if err := ReleaseStartupMemory(&informertest.FakeInformers{}, 0).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if released := int64(after.HeapReleased) - int64(before.HeapReleased); released < garbage/2 {
		t.Errorf("returned %d MiB to the operating system after %d MiB of garbage; want at least half of it", released>>20, garbage>>20)
	}
}
