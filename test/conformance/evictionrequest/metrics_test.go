package evictionrequest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// series are the samples of the metric whose labels include want, rendered "labels=value".
func series(name string, want map[string]string) ([]string, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			var s []string
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				s = append(s, l.GetName()+"="+l.GetValue())
			}
			ok := true
			for k, v := range want {
				ok = ok && labels[k] == v
			}
			if ok {
				out = append(out, fmt.Sprintf("%s=%v", strings.Join(s, ","), m.GetGauge().GetValue()))
			}
		}
	}
	return out, nil
}

// TestMetrics: upstream's Eviction controller gauges (KEP-4563 "Monitoring Requirements"), under
// upstream's names and labels: each responder's state, the requests' intents and the number of
// responders of an Eviction; their series go with the Eviction and the request.
func TestMetrics(t *testing.T) {
	ns := namespace(t)
	// The imperative evictor's eviction is refused: the pod stays.
	blockingBudget(t, ns)
	pod := createPod(t, ns, withResponder(responderA, 1001))
	r := createRequest(t, ns, pod.Name, pod.UID, requester1)
	name := "pod-1-" + pod.Name
	expectSeries := func(metric string, labels map[string]string, want ...string) {
		t.Helper()
		eventually(t, fmt.Sprintf("%s%v: %v", metric, labels, want), func(context.Context) (bool, string, error) {
			got, err := series(metric, labels)
			if err != nil {
				return false, "", err
			}
			if len(got) != len(want) {
				return false, fmt.Sprint(got), nil
			}
			for i := range want {
				if !strings.Contains(got[i], want[i]) {
					return false, fmt.Sprint(got), nil
				}
			}
			return true, fmt.Sprint(got), nil
		})
	}
	onEviction := map[string]string{"namespace": ns, "eviction": name}
	expectSeries("evictionrequest_controller_responder_state", map[string]string{"namespace": ns, "eviction": name, "responder": responderA},
		"responder="+responderA+",state=Active,target_name="+pod.Name+",target_type=pod=1")
	expectSeries("evictionrequest_controller_responder_state", map[string]string{"namespace": ns, "eviction": name, "responder": imperative},
		"state=Inactive")
	expectSeries("evictionrequest_controller_target_responders", onEviction, "target_name="+pod.Name+",target_type=pod=2")
	expectSeries("evictionrequest_controller_requester_intent", map[string]string{"namespace": ns, "evictionrequest": r.Name},
		"intent=Eviction,namespace="+ns+",requester="+requester1+",target_name="+pod.Name+",target_type=pod=1")

	markResponder(t, ns, name, fieldManagerA, responderA, true)
	expectSeries("evictionrequest_controller_responder_state", map[string]string{"namespace": ns, "eviction": name, "responder": responderA}, "state=Completed")

	setIntent(t, r, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
	expectSeries("evictionrequest_controller_requester_intent", map[string]string{"namespace": ns, "evictionrequest": r.Name}, "intent=Withdrawn")
	// The request deleted, the live pod's Eviction is collected: their series go.
	if err := k8s.Delete(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	expectSeries("evictionrequest_controller_requester_intent", map[string]string{"namespace": ns, "evictionrequest": r.Name})
	expectSeries("evictionrequest_controller_responder_state", onEviction)
	expectSeries("evictionrequest_controller_target_responders", onEviction)
}
