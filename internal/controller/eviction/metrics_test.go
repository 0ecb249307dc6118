package eviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// TestGaugesFromCache: upstream's gauges are what the caches hold at the scrape: each request
// once, whatever the number of Eviction controllers in the process; each controller's own
// Evictions, once it leads; nothing of a request being deleted. (That a series goes with its
// object is test/conformance/evictionrequest's TestMetrics.)
func TestGaugesFromCache(t *testing.T) {
	pod, req := askedPod()
	deleting := req.DeepCopy()
	deleting.Name, deleting.UID = "deleting", "uid-deleting"
	deleting.Finalizers = []string{"example.com/hold"}
	eviction := func(controller string) *lifecyclev1alpha1.Eviction {
		e := &lifecyclev1alpha1.Eviction{}
		e.Namespace, e.Name = pod.Namespace, "pod-"+controller
		e.Labels = map[string]string{evictionrequest.ControllerLabel: controller}
		e.Spec.Target.Pod = &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}
		e.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{
			{Name: responder, State: lifecyclev1alpha1.ResponderStateActive},
			{Name: lifecyclev1alpha1.EvictionResponderImperativeEviction, State: lifecyclev1alpha1.ResponderStateInactive},
		}
		return e
	}
	objs := []client.Object{pod, req, deleting, eviction("a"), eviction("b"), eviction("c")}
	cache := func() client.Client {
		c := writesClient(t, map[string]int{}, objs...)
		// Held by its finalizer: being deleted.
		if err := c.Delete(context.Background(), deleting.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := &gaugesCollector{}
	a, b := c.add(cache(), "a"), c.add(cache(), "b")
	c.add(cache(), "c") // never leads
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	gather := func() []string {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range families {
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					if l.GetName() == "eviction" || l.GetName() == "evictionrequest" || l.GetName() == "state" {
						labels = append(labels, l.GetValue())
					}
				}
				out = append(out, fmt.Sprintf("%s{%s}=%v", strings.TrimPrefix(f.GetName(), "evictionrequest_controller_"), strings.Join(labels, ","), m.GetGauge().GetValue()))
			}
		}
		slices.Sort(out)
		return out
	}

	if got := gather(); len(got) != 0 {
		t.Fatalf("before any controller leads: %q; want no series", got)
	}
	a.leading.Store(true)
	b.leading.Store(true)
	want := []string{
		"requester_intent{" + req.Name + "}=1",
		"responder_state{pod-a,Active}=1", "responder_state{pod-a,Inactive}=1",
		"responder_state{pod-b,Active}=1", "responder_state{pod-b,Inactive}=1",
		"target_responders{pod-a}=2", "target_responders{pod-b}=2",
	}
	if got := gather(); !slices.Equal(got, want) {
		t.Fatalf("two controllers leading: %q; want %q (the request once, each controller's own Evictions, not c's)", got, want)
	}
}
