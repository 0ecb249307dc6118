package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// withCRD installs the CRD name as mutate changes it, until restore is called or the test ends,
// then the real one again: the tests below store objects an older CRD admitted.
func withCRD(t *testing.T, name string, mutate func(*apiextensionsv1.CustomResourceDefinition)) (restore func()) {
	t.Helper()
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	orig, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := orig.DeepCopy()
	mutate(old)
	if _, err := crds.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		cur, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		cur.Spec = orig.Spec
		if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// withoutDurationRules installs the NodeMaintenance CRD as it was before the API server validated
// durations (no CEL rules on them) until the test ends, then the real one again.
func withoutDurationRules(t *testing.T) {
	t.Helper()
	withCRD(t, "nodemaintenances.nodemaint.dev", func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.XValidations = nil
			strip := func(props map[string]apiextensionsv1.JSONSchemaProps, field string) {
				p := props[field]
				p.XValidations = nil
				props[field] = p
			}
			strip(spec.Properties, "evacuationResponseTimeout")
			strip(spec.Properties, "drainTimeout")
			shutdown := spec.Properties["shutdown"]
			strip(shutdown.Properties, "notReadyGracePeriod")
			spec.Properties["shutdown"] = shutdown
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
	})
}

// TestUndecodableDurationStopsNothing: a NodeMaintenance stored with `evacuationResponseTimeout:
// 1d` (before the API server refused it) neither stops the controller from reconciling the
// others, nor has a pod evicted; it is reported on its own status and by a Warning Event, keeps
// its node cordoned, and can still be deleted (issue 16, item 1).
func TestUndecodableDurationStopsNothing(t *testing.T) {
	ctx := context.Background()
	withoutDurationRules(t)
	createNode(t, "badspec-node", nil, false)
	createNode(t, "goodspec-node", nil, false)
	createPod(t, "badspec-pod", "badspec-node", ownedByReplicaSet)
	createPod(t, "goodspec-pod", "goodspec-node", ownedByReplicaSet)

	bad := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: nodemaint.dev/v1alpha1
kind: NodeMaintenance
metadata: {name: badspec}
spec:
  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [badspec-node]}]}]}
  cordon: true
  drain: true
  evacuationResponseTimeout: 1d
  drainTimeout: 2 days
  drainTimeoutAction: Delete`), &bad.Object); err != nil {
		t.Fatal(err)
	}
	// The API server applies the stripped CRD a moment after the update.
	eventually(t, "NodeMaintenance with evacuationResponseTimeout 1d stored", func(ctx context.Context) (bool, string, error) {
		err := k8s.Create(ctx, bad.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err), nil
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), bad) })
	createDrainNM(t, "goodspec", 1e9, "goodspec-node") // response timeout 1s

	// The good maintenance is reconciled: finalizer, cordon, its pod evicted, its status written.
	expectEvicted(t, "goodspec-pod")
	eventually(t, "goodspec status and finalizer", func(ctx context.Context) (bool, string, error) {
		good := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "goodspec"}, good)
		return controllerutil.ContainsFinalizer(good, nodemaintv1alpha1.Finalizer) && good.Status.SelectedNodes == 1 &&
			good.Status.Phase == nodemaintv1alpha1.PhaseDrain, fmt.Sprintf("finalizers %v, status %+v", good.Finalizers, good.Status), err
	})

	// The bad one is reported on its own status and by an Event, naming the field and the value.
	c := expectCondition(t, "badspec", nodemaintv1alpha1.ConditionSpecValid, metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidSpec)
	for _, want := range []string{`spec.evacuationResponseTimeout: "1d"`, `spec.drainTimeout: "2 days"`} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("SpecValid message %q does not name %s", c.Message, want)
		}
	}
	if e := expectWarning(t, "NodeMaintenance", "badspec", nodemaintv1alpha1.ReasonInvalidSpec); !strings.Contains(e.Note, "1d") {
		t.Errorf("InvalidSpec Event %q does not name the value", e.Note)
	}
	// It keeps cordoning and requests evacuation, but never evicts nor deletes.
	eventually(t, "badspec-node cordoned, evacuation of badspec-pod requested", func(ctx context.Context) (bool, string, error) {
		node := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "badspec-node"}, node); err != nil {
			return false, "", err
		}
		pod, err := getPod(ctx, "badspec-pod")
		if err != nil {
			return false, "", err
		}
		requested := evacuation.Requested(pod)
		return node.Spec.Unschedulable && requested, fmt.Sprintf("unschedulable %v, %s", node.Spec.Unschedulable, testutil.Request(pod)), nil
	})
	// The good pod, with a response timeout of 1s, went long ago; the bad one (1d decoded as 0)
	// would have gone at once.
	notEvicted(t, "badspec-pod")

	// Deleting the bad maintenance works: its finalizer goes, its node is uncordoned.
	if err := k8s.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "badspec gone, badspec-node uncordoned", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, types.NamespacedName{Name: "badspec"}, &nodemaintv1alpha1.NodeMaintenance{})
		node := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "badspec-node"}, node); err != nil {
			return false, "", err
		}
		return apierrors.IsNotFound(err) && !node.Spec.Unschedulable, fmt.Sprintf("get: %v, unschedulable %v", err, node.Spec.Unschedulable), nil
	})
	notEvicted(t, "badspec-pod")
}

// withoutDrainRuleValidation installs the DrainRule CRD without its CEL rules (as before the API
// server refused selectors that do not parse) until restore is called or the test ends.
func withoutDrainRuleValidation(t *testing.T) (restore func()) {
	t.Helper()
	var strip func(p *apiextensionsv1.JSONSchemaProps)
	strip = func(p *apiextensionsv1.JSONSchemaProps) {
		p.XValidations = nil
		for k, v := range p.Properties {
			strip(&v)
			p.Properties[k] = v
		}
		if p.Items != nil && p.Items.Schema != nil {
			strip(p.Items.Schema)
		}
		if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
			strip(p.AdditionalProperties.Schema)
		}
	}
	return withCRD(t, "drainrules.nodemaint.dev", func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			strip(crd.Spec.Versions[i].Schema.OpenAPIV3Schema)
		}
	})
}

// TestInvalidDrainRuleHoldsPods: a Skip DrainRule stored with a selector that does not parse
// (operator In without values) is not ignored: the pod it was meant to protect stays on the
// drained node, reported blocked as InvalidDrainRule naming the rule; the rule's Valid condition
// and a Warning Event say why; fixing the rule lets the drain finish (issue 16, item 5).
func TestInvalidDrainRuleHoldsPods(t *testing.T) {
	restore := withoutDrainRuleValidation(t)
	createNode(t, "badrule-node", nil, false)
	createPod(t, "badrule-db", "badrule-node", ownedByReplicaSet, withLabels(map[string]string{"app": "badrule-db"}))

	rule := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: nodemaint.dev/v1alpha1
kind: DrainRule
metadata: {name: badrule-protect-db}
spec:
  drain: {behavior: Skip}
  pods:
  - selector:
      matchExpressions: [{key: app, operator: In}]`), &rule.Object); err != nil {
		t.Fatal(err)
	}
	eventually(t, "DrainRule with a selector that does not parse stored", func(ctx context.Context) (bool, string, error) {
		err := k8s.Create(ctx, rule.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err), nil
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rule) })

	createDrainNM(t, "badrule", 1e9, "badrule-node") // response timeout 1s
	expectBlocked(t, "badrule", "badrule-node", "badrule-db", nodemaintv1alpha1.BlockedReasonInvalidDrainRule, "DrainRule badrule-protect-db")
	eventually(t, "DrainRule Valid=False", func(ctx context.Context) (bool, string, error) {
		dr := &nodemaintv1alpha1.DrainRule{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "badrule-protect-db"}, dr); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(dr.Status.Conditions, nodemaintv1alpha1.ConditionValid)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodemaintv1alpha1.ReasonInvalidSelector &&
			strings.Contains(c.Message, "DrainRule badrule-protect-db: pods:") && c.ObservedGeneration == dr.Generation, fmt.Sprintf("%+v", c), nil
	})
	if e := expectWarning(t, "DrainRule", "badrule-protect-db", nodemaintv1alpha1.ReasonInvalidSelector); !strings.Contains(e.Note, "holds every pod") {
		t.Errorf("InvalidSelector Event %q does not say the pods are held", e.Note)
	}
	// Long past the response timeout, nothing evicted it, and the drain is not complete.
	expectStatus(t, "badrule", "badrule-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 1, NodePending: 1, Drained: "False", UpToDate: true})
	notEvicted(t, "badrule-db")

	// Fixed (with validation back in place), the rule skips the pod and the drain completes.
	restore()
	eventually(t, "DrainRule fixed", func(ctx context.Context) (bool, string, error) {
		dr := &nodemaintv1alpha1.DrainRule{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "badrule-protect-db"}, dr); err != nil {
			return false, "", err
		}
		orig := dr.DeepCopy()
		dr.Spec.Pods[0].Selector.MatchExpressions[0].Values = []string{"badrule-db"}
		err := k8s.Patch(ctx, dr, client.MergeFrom(orig))
		return err == nil, fmt.Sprint(err), nil
	})
	expectStatus(t, "badrule", "badrule-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True", UpToDate: true})
	notEvicted(t, "badrule-db")
	eventually(t, "DrainRule Valid=True", func(ctx context.Context) (bool, string, error) {
		dr := &nodemaintv1alpha1.DrainRule{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "badrule-protect-db"}, dr)
		return meta.IsStatusConditionTrue(dr.Status.Conditions, nodemaintv1alpha1.ConditionValid), fmt.Sprintf("%+v", dr.Status), err
	})
}
