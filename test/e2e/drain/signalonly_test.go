package drain_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// standInEvictionController plays an Eviction controller other than nodemaint's (the in-tree one
// some day, another installation's, or its imperative evictor alone) in the namespace until the
// test ends, where the cluster serves the EvictionRequest API: it evicts (policy/v1) the pod of
// every EvictionRequest asking for its eviction, at once, whoever asked. It returns the pods it
// saw requested, by name.
func standInEvictionController(t *testing.T, ns string) (requested func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	requested = func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for name := range seen {
			out = append(out, name)
		}
		return out
	}
	if !framework.Cluster().EvictionRequestAPI() {
		return requested // nothing can ask through EvictionRequests
	}
	wc, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &lifecyclev1alpha1.EvictionRequestList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			r, ok := ev.Object.(*lifecyclev1alpha1.EvictionRequest)
			if !ok || r.Spec.Target.Pod == nil || r.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction || r.DeletionTimestamp != nil {
				continue
			}
			mu.Lock()
			seen[r.Spec.Target.Pod.Name] = true
			mu.Unlock()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Spec.Target.Pod.Name}}
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}, DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.Spec.Target.Pod.UID}}}
			if err := framework.Client().SubResource("eviction").Create(ctx, pod, eviction); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				t.Logf("stand-in Eviction controller: evicting %s: %v", pod.Name, err)
			}
		}
	}()
	return requested
}

// TestSignalOnlyUnderAnotherEvictionController: a SignalOnly maintenance never has a pod evicted,
// whatever Eviction controller runs. nodemaint runs without its own (--eviction-controller=off)
// beside a stand-in that evicts every pod an EvictionRequest asks for (standInEvictionController),
// as Kubernetes' own will. The pod names a responder of its own (which never answers), so that
// under the EvictionRequest protocol an EvictionRequest would reach it: the SignalOnly maintenance
// asks it through the EvacuationRequest pod condition alone, under either protocol, and its status
// says that it is never evicted. A second maintenance of the node evicts, but its podSelector leaves
// the pod alone: it does not make the pod's request one for eviction either. Its own pod is
// evicted meanwhile (through an EvictionRequest and the stand-in where the API is served), the
// evidence that the drain looked at the node with an evicting maintenance. Switched to Evict, the
// SignalOnly maintenance has the pod evicted too. Run under both protocols (make test-e2e's
// second pass, EVICTION_REQUEST_API=true).
func TestSignalOnlyUnderAnotherEvictionController(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	ctx := t.Context()
	ns := framework.Namespace(t)
	framework.NewController(t).Start("--eviction-controller=off")
	requested := standInEvictionController(t, ns)
	target := node(3)

	silent := []corev1.EvictionResponder{{Name: "silent.example.com/operator", Priority: ptr.To[int32](10000)}}
	signal, other := barePod(ns, "signal", map[string]string{"app": "signal"}), barePod(ns, "other", map[string]string{"app": "other"})
	if framework.Cluster().EvictionRequestAPI() {
		signal.Spec.EvictionResponders, other.Spec.EvictionResponders = silent, silent
	}
	signal.Spec.NodeName, other.Spec.NodeName = target, target
	create(t, signal, other)
	waitRunning(t, ns, 2)

	nm := func(name string, policy nodemaintv1alpha1.EvictionPolicy, pods *metav1.LabelSelector) *nodemaintv1alpha1.NodeMaintenance {
		return &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + ns},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
				NodeSelector: testutil.NodeSelectorFor(target), Cordon: true, Drain: true, Reason: "firmware",
				EvictionPolicy: policy, PodSelector: pods,
				EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second},
			},
		}
	}
	signalOnly := nm("signal", nodemaintv1alpha1.EvictionPolicySignalOnly, nil)
	evicting := nm("evicting", nodemaintv1alpha1.EvictionPolicyEvict, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}})
	for _, m := range []*nodemaintv1alpha1.NodeMaintenance{signalOnly, evicting} {
		create(t, m)
		t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), m) })
	}

	testutil.Eventually(t, timeout, "the other pod evicted, the pod asked through its condition and reported as never evicted (or evicted)", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(other), &p)
		if client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		otherGone := apierrors.IsNotFound(err) || p.DeletionTimestamp != nil
		switch err := framework.Client().Get(ctx, client.ObjectKeyFromObject(signal), &p); {
		case apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil:
			return true, "", nil // evicted: said below
		case err != nil:
			return false, "", err
		}
		cond := evacuation.Condition(&p, evacuation.Request)
		asked := cond != nil && cond.Status == corev1.ConditionTrue && cond.Reason == evacuation.ReasonNodeMaintenance && cond.Message == "firmware"
		st, _, err := nodeStatus(ctx, signalOnly.Name, target)
		if err != nil {
			return false, "", err
		}
		// "not selected by the spec.podSelector of the maintenances that evict: waiting for the
		// owner, never evicting", the evicting maintenance on the node leaving it alone.
		reported := strings.Contains(fmt.Sprint(st.Blocked), "never evicting")
		return otherGone && asked && reported, fmt.Sprintf("other gone %v, asked %v (%+v), status %+v", otherGone, asked, cond, st.Blocked), nil
	})
	var p corev1.Pod
	if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(signal), &p); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod of the SignalOnly maintenance evicted (%v; the stand-in saw EvictionRequests for %v)", err, requested())
	}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if framework.Cluster().EvictionRequestAPI() {
		if err := framework.Client().List(ctx, &reqs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range reqs.Items {
		if r.Spec.Target.Pod != nil && r.Spec.Target.Pod.Name == signal.Name {
			t.Errorf("EvictionRequest %s asks for the SignalOnly maintenance's pod (intent %s, requester %s)", r.Name, r.Spec.Intent, r.Spec.Requester)
		}
	}
	for _, name := range requested() {
		if name == signal.Name {
			t.Errorf("the stand-in Eviction controller saw an EvictionRequest for the SignalOnly maintenance's pod")
		}
	}
	if framework.Cluster().EvictionRequestAPI() && !strings.Contains(fmt.Sprint(requested()), other.Name) {
		t.Errorf("the stand-in Eviction controller saw no EvictionRequest of the other pod (saw %v): it proves nothing", requested())
	}
	if t.Failed() {
		return
	}

	// Switched to Evict, the maintenance has the pod evicted: what held it was the policy.
	orig := signalOnly.DeepCopy()
	signalOnly.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicyEvict
	if err := framework.Client().Patch(ctx, signalOnly, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "the pod evicted once the maintenance evicts", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(signal), &p)
		return apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil, "", client.IgnoreNotFound(err)
	})
}
