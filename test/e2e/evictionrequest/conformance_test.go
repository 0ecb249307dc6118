package evictionrequest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestEvictionRequestAPIOperations is Kubernetes' API conformance test of KEP-4563's API,
// "EvictionRequest API should support EvictionRequest API operations"
// (test/e2e/apimachinery/evictionrequest.go, kubernetes/kubernetes @3ce50ce, Release v1.37),
// written here against the local cluster: lifecycle.k8s.io/v1alpha1 is in the discovery of /apis,
// of /apis/lifecycle.k8s.io and of the group version, with evictionrequests and their /status;
// evictionrequests support create, get, list, watch, patch, update, delete and deletecollection,
// and their /status get and update. Upstream's test covers EvictionRequests only; the same
// operations are checked of Evictions, whose writer is the Eviction controller (nodemaint's here).
// No nodemaint-controller runs: the API alone.
func TestEvictionRequestAPIOperations(t *testing.T) {
	cfg := framework.Cluster().RESTConfig()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gv := lifecyclev1alpha1.SchemeGroupVersion

	// Discovery: /apis, /apis/lifecycle.k8s.io, /apis/lifecycle.k8s.io/v1alpha1.
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == gv.Group && slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version })
	}) {
		t.Fatalf("/apis lists no %s", gv)
	}
	var group metav1.APIGroup
	if err := dc.RESTClient().Get().AbsPath("/apis", gv.Group).Do(t.Context()).Into(&group); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(group.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version }) {
		t.Fatalf("/apis/%s lists versions %v, not %s", gv.Group, group.Versions, gv.Version)
	}
	resources, err := dc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evictionrequests", "evictionrequests/status", "evictions", "evictions/status"} {
		if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			t.Errorf("/apis/%s lists no %s", gv, want)
		}
	}

	ns := framework.Namespace(t)
	target := pod(ns, "er-target")
	if err := framework.Client().Create(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	ref := map[string]any{"name": target.Name, "uid": string(target.UID)}
	t.Run("evictionrequests", func(t *testing.T) {
		apiOperations(t, dyn.Resource(gv.WithResource("evictionrequests")).Namespace(ns), "EvictionRequest", map[string]any{
			"target": map[string]any{"pod": ref}, "requester": "e2e-test.example.com/evictionrequest",
			"intent": string(lifecyclev1alpha1.EvictionRequestIntentEviction),
		})
	})
	t.Run("evictions", func(t *testing.T) {
		apiOperations(t, dyn.Resource(gv.WithResource("evictions")).Namespace(ns), "Eviction", map[string]any{
			"target": map[string]any{"pod": ref},
		})
	})
}

// apiOperations runs the operations of upstream's test on one resource: three objects of the spec
// created (generateName, a label of the test's own), got, listed by the label, watched from the
// list's resourceVersion while patched (an annotation; a larger resourceVersion) and updated
// (another annotation), the /status got and updated (status.observedGeneration), one deleted
// (then NotFound, two listed), and the collection deleted (none listed).
func apiOperations(t *testing.T, res dynamic.ResourceInterface, kind string, spec map[string]any) {
	ctx := t.Context()
	gv := lifecyclev1alpha1.SchemeGroupVersion
	labelKey, labelValue := "example-e2e-er-label", rand.String(8)
	selector := metav1.ListOptions{LabelSelector: labelKey + "=" + labelValue}
	t.Cleanup(func() { _ = res.DeleteCollection(context.Background(), metav1.DeleteOptions{}, selector) })
	template := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(), "kind": kind,
		"metadata": map[string]any{"generateName": "e2e-example-", "labels": map[string]any{labelKey: labelValue}},
		"spec":     spec,
	}}

	// create, get
	var created *unstructured.Unstructured
	for range 3 {
		var err error
		if created, err = res.Create(ctx, template.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating a %s: %v", kind, err)
		}
	}
	read, err := res.Get(ctx, created.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if read.GetUID() != created.GetUID() {
		t.Fatalf("got UID %s, want %s", read.GetUID(), created.GetUID())
	}
	if read.GetResourceVersion() == "" {
		t.Fatalf("got no resourceVersion, want one")
	}

	// list, watch
	list, err := res.List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("listed %d by the label: want 3", len(list.Items))
	}
	watchOpts := selector
	watchOpts.ResourceVersion = list.GetResourceVersion()
	w, err := res.Watch(ctx, watchOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// patch, update
	patched, err := res.Patch(ctx, created.GetName(), types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.GetAnnotations()["patched"] != "true" {
		t.Fatalf("patched annotations %v: want patched=true", patched.GetAnnotations())
	}
	if cmp, err := resourceversion.CompareResourceVersion(read.GetResourceVersion(), patched.GetResourceVersion()); err != nil || cmp != -1 {
		t.Fatalf("patched resourceVersion %s, read %s: want a larger one (%v)", patched.GetResourceVersion(), read.GetResourceVersion(), err)
	}
	var updated *unstructured.Unstructured
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := res.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		a := o.GetAnnotations()
		a["updated"] = "true"
		o.SetAnnotations(a)
		updated, err = res.Update(ctx, o, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if updated.GetAnnotations()["updated"] != "true" {
		t.Fatalf("updated annotations %v: want updated=true", updated.GetAnnotations())
	}
	for sawPatch := false; !sawPatch; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed")
			}
			if ev.Type != watch.Modified {
				t.Fatalf("watch event %s: want %s", ev.Type, watch.Modified)
			}
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || o.GetKind() != kind {
				t.Fatalf("watched a %T (%v): want a %s", ev.Object, ev.Object.GetObjectKind().GroupVersionKind(), kind)
			}
			sawPatch = o.GetAnnotations()["patched"] == "true"
		case <-time.After(timeout):
			t.Fatal("no watch event with the patch")
		}
	}

	// /status: get, update
	st, err := res.Get(ctx, created.GetName(), metav1.GetOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if st.GroupVersionKind() != gv.WithKind(kind) {
		t.Fatalf("/status is a %v, want a %s", st.GroupVersionKind(), kind)
	}
	if st.GetUID() != created.GetUID() {
		t.Fatalf("/status is of UID %s, want %s", st.GetUID(), created.GetUID())
	}
	var statusUpdated *unstructured.Unstructured
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := res.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(o.Object, o.GetGeneration(), "status", "observedGeneration"); err != nil {
			return err
		}
		statusUpdated, err = res.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("updating the /status of %s: %v", created.GetName(), err)
	}
	if got, _, _ := unstructured.NestedInt64(statusUpdated.Object, "status", "observedGeneration"); got != statusUpdated.GetGeneration() {
		t.Fatalf("status.observedGeneration %d after the update: want %d", got, statusUpdated.GetGeneration())
	}

	// delete, deletecollection
	if err := res.Delete(ctx, created.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Get(ctx, created.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("got the deleted %s: %v, want NotFound", kind, err)
	}
	if list, err = res.List(ctx, selector); err != nil || len(list.Items) != 2 {
		t.Fatalf("listed %d after a delete (%v): want 2", len(list.Items), err)
	}
	if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, selector); err != nil {
		t.Fatal(err)
	}
	if list, err = res.List(ctx, selector); err != nil || len(list.Items) != 0 {
		t.Fatalf("listed %d after deleting the collection (%v): want none", len(list.Items), err)
	}
}
