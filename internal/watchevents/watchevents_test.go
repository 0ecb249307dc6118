package watchevents

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// A cache built with NewInformer counts the events of its watches on a real API server, by kind
// and type, and still serves the objects.
func TestCountsWatchEvents(t *testing.T) {
	ctx := t.Context()
	c, err := cache.New(env.Config, cache.Options{Scheme: testenv.Scheme, NewInformer: NewInformer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	added, modified := events.WithLabelValues("ConfigMap", "ADDED"), events.WithLabelValues("ConfigMap", "MODIFIED")
	added0, modified0 := value(t, added), value(t, modified)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counted", Namespace: "default"}, Data: map[string]string{"a": "1"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "2"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the cache serving the update", func(ctx context.Context) (bool, string, error) {
		var got corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
			return false, err.Error(), nil
		}
		return got.Data["a"] == "2", fmt.Sprintf("a=%s", got.Data["a"]), nil
	})
	if got := value(t, added) - added0; got != 1 {
		t.Errorf("ConfigMap ADDED events counted: %v, want 1", got)
	}
	if got := value(t, modified) - modified0; got != 1 {
		t.Errorf("ConfigMap MODIFIED events counted: %v, want 1", got)
	}
}

// A watch stopped while an event waits for its reader leaves no goroutine behind (a reflector
// stops its watch without reading on).
func TestStoppedWatchLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	in := watch.NewFake()
	w := counted(in, "ConfigMap")
	in.Add(&corev1.ConfigMap{}) // taken by the loop, which then waits for a reader
	w.Stop()
	testutil.Eventually(t, 10*time.Second, "the counting loop ended", func(context.Context) (bool, string, error) {
		n := runtime.NumGoroutine()
		return n <= before, fmt.Sprintf("%d goroutines, %d before", n, before), nil
	})
}

func TestKindOf(t *testing.T) {
	if got := kindOf(&corev1.Pod{}); got != "Pod" {
		t.Errorf("kind of a Pod: %q", got)
	}
	pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Machine"}}
	if got := kindOf(pm); got != "Machine" {
		t.Errorf("kind of a Machine's metadata: %q", got)
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
