// Package watchevents counts the watch events nodemaint-controller's informers receive, by kind
// and event type (nodemaint_watch_events_total). The events are most of what a cluster's size
// costs the controller at rest: every change of a node, pod, Deployment or Eviction it caches
// is decoded, trimmed and handed to its controllers' predicates, whether or not it leads to a
// reconcile. client-go keeps no such count (its reflector metrics are gone), and the API
// server's apiserver_watch_events_total adds up every watcher's.
package watchevents

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var events = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_watch_events_total",
	Help: "Watch events received by nodemaint-controller's informers, by kind (Pod, Node, Eviction, ...) and type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR). A list's items are not counted, but for the initial events of a watch that streams them.",
}, []string{"kind", "type"})

func init() { metrics.Registry.MustRegister(events) }

// NewInformer is a cache.Options.NewInformer: client-go's shared index informer, whose watches'
// events are counted. controller-runtime hands its informers a *cache.ListWatch; another
// ListerWatcher is used as it is, uncounted.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if l, ok := lw.(*toolscache.ListWatch); ok && l.WatchFuncWithContext != nil {
		kind, watchFunc := kindOf(obj), l.WatchFuncWithContext
		l.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFunc(ctx, opts)
			if err != nil {
				return nil, err
			}
			return counted(w, kind), nil
		}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// countingWatch passes a watch's events on, counting each. Unlike watch.Filter, its loop ends
// when the watch is stopped even if nobody reads the events any more (a reflector stops its
// watch and returns), so a restarted watch leaves no goroutine behind.
type countingWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func counted(in watch.Interface, kind string) watch.Interface {
	w := &countingWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.loop(kind)
	return w
}

func (w *countingWatch) loop(kind string) {
	defer close(w.out)
	for e := range w.in.ResultChan() {
		events.WithLabelValues(kind, string(e.Type)).Inc()
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}

func (w *countingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *countingWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.in.Stop()
}

// kindOf names the informer's kind: the object's GroupVersionKind where it carries one
// (unstructured objects, metadata-only ones), else its Go type's name.
func kindOf(obj runtime.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
