package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	testmanifests "github.com/nodemaint/nodemaint/test/manifests"
)

// policyTimeout bounds the wait for the API server to enforce, or stop enforcing, a policy that
// was just created or deleted (its admission plugin learns of policies through an informer).
const policyTimeout = 30 * time.Second

// The messages of the policies of config/admission.
const (
	deleteRefused = "may not delete pods in every namespace, so it may not ask for drainTimeoutAction: Delete"
	// frozen+field: a change of field (one of those the message lists) of a maintenance with
	// drainTimeoutAction: Delete, by a user who may not delete pods.
	frozen     = "may not delete pods in every namespace, so it may only stop a NodeMaintenance with drainTimeoutAction: Delete (drain: false, cordon: false, drainTimeoutAction: Report) or delete it, not change its "
	byPoolOnly = "every nodeSelectorTerm must require the node label nodemaint.dev/pool with operator In"
)

// TestAdmissionPolicies applies the admission policies as config/default installs them
// (config/admission) and proves them with impersonated users who hold only the RBAC rules
// given here; then adds the node-scope component (config/admission/node-scope) with the sample
// grant of config/samples/node-scope-team.yaml.
func TestAdmissionPolicies(t *testing.T) {
	admin := framework.Client()
	ctx := t.Context()
	suffix := strings.TrimPrefix(framework.Namespace(t), "e2e-") // unique names for this run
	nm := func(name string) string { return name + "-" + suffix }

	// alice may only create NodeMaintenances; bob may also read and change them.
	alice, bob := impersonate(t, "alice-"+suffix), impersonate(t, "bob-"+suffix)
	grant(t, "alice-"+suffix, rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create"}})
	grant(t, "bob-"+suffix, rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create", "get", "patch", "update"}})

	// Without the policy, alice can ask for Delete: the back door this closes.
	if err := alice.Create(ctx, deleting(nm("before")), client.DryRunAll); err != nil {
		t.Fatalf("without the policy, alice's dry-run create with Delete: %v", err)
	}

	apply(t, withoutControllerWrites(t, renderKustomize(t, repoPath("config", "admission"))), alice)
	waitRefused(t, alice, deleting(nm("probe")), deleteRefused)
	expectTypeChecked(t, "nodemaint-drain-timeout-delete")

	t.Run("DrainTimeoutDelete", func(t *testing.T) {
		// alice: Delete refused with the policy's message, nothing created.
		expectRefused(t, alice.Create(ctx, deleting(nm("alice-delete"))), deleteRefused)
		expectAbsent(t, nm("alice-delete"))
		// The same without Delete is allowed.
		report := maintenance(nm("alice-report"), byName("node-0")...)
		create(t, alice, report)

		// bob may not turn it into a Delete maintenance.
		err := bob.Patch(ctx, report, mergePatch(`{"spec":{"drainTimeout":"30m","drainTimeoutAction":"Delete"}}`))
		expectRefused(t, err, deleteRefused)
		var cur nodemaintv1alpha1.NodeMaintenance
		if err := admin.Get(ctx, client.ObjectKeyFromObject(report), &cur); err != nil || cur.Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete {
			t.Errorf("after the refused patch: drainTimeoutAction %q, %v", cur.Spec.DrainTimeoutAction, err)
		}

		// A cluster admin may ask for Delete; bob may then only stop it or delete it
		// (TestDeleteMaintenanceFrozen goes through every field of the spec).
		adm := deleting(nm("admin-delete"))
		adm.Spec.Cordon = true
		create(t, admin, adm)
		expectRefused(t, bob.Patch(ctx, adm, mergePatch(`{"spec":{"drain":true}}`)), frozen+"drain")
		if err := admin.Patch(ctx, adm, mergePatch(`{"spec":{"drain":true}}`)); err != nil {
			t.Fatalf("cluster admin starting the drain: %v", err)
		}
		expectRefused(t, bob.Patch(ctx, adm, mergePatch(`{"spec":{"reason":"other"}}`)), frozen+"reason")
		if err := bob.Patch(ctx, adm, mergePatch(`{"spec":{"drain":false}}`)); err != nil {
			t.Errorf("bob stopping the drain of a Delete maintenance: %v", err)
		}
		if err := bob.Patch(ctx, adm, mergePatch(`{"spec":{"drainTimeoutAction":"Report"}}`)); err != nil {
			t.Errorf("bob setting drainTimeoutAction: Report: %v", err)
		}

		// Deleting pods in one namespace is not enough; in every namespace it is.
		carol, dave := impersonate(t, "carol-"+suffix), impersonate(t, "dave-"+suffix)
		grant(t, "carol-"+suffix, rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create"}})
		grantIn(t, framework.ControllerNamespace, "carol-"+suffix, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})
		grant(t, "dave-"+suffix,
			rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})
		expectRefused(t, carol.Create(ctx, deleting(nm("carol-delete"))), deleteRefused)
		expectAbsent(t, nm("carol-delete"))
		create(t, dave, deleting(nm("dave-delete")))
	})

	t.Run("DeleteFrozen", func(t *testing.T) { testDeleteFrozen(t, nm) })

	t.Run("NodeScope", func(t *testing.T) {
		// The component as an overlay enables it, and the shipped sample grant for team-a.
		overlay := t.TempDir()
		kustomization := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n",
			relTo(t, overlay, repoPath("config", "admission")), relTo(t, overlay, repoPath("config", "admission", "node-scope")))
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
			t.Fatal(err)
		}
		apply(t, withoutControllerWrites(t, renderKustomize(t, overlay)), alice)
		sample, err := os.ReadFile(repoPath("config", "samples", "node-scope-team.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		apply(t, string(sample), nil)

		// erin is in team-a, which the sample grants pool-a; frank has the same rights on
		// NodeMaintenances but no pool.
		erin := impersonate(t, "erin-"+suffix, "team-a")
		frank := impersonate(t, "frank-"+suffix)
		grant(t, "frank-"+suffix, rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create"}})
		waitRefused(t, erin, maintenance(nm("probe"), byName("node-0")...), byPoolOnly)
		expectTypeChecked(t, "nodemaint-node-scope")

		// erin may cordon and drain pool-a.
		a := maintenance(nm("erin-pool-a"), byPool("pool-a")...)
		a.Spec.Cordon, a.Spec.Drain = true, true
		create(t, erin, a)
		// Not pool-b, not pool-a and pool-b, not a selector without the pool, not every node.
		for name, terms := range map[string][]corev1.NodeSelectorTerm{
			"erin-pool-b":    byPool("pool-b"),
			"erin-pool-a-b":  byPool("pool-a", "pool-b"),
			"erin-pool-a-or": append(byPool("pool-a"), byName("node-0")...),
		} {
			err := erin.Create(ctx, maintenance(nm(name), terms...))
			want := map[string]string{
				"erin-pool-b":    "may not maintain every node pool it selects (nodemaint.dev/pool: pool-b)",
				"erin-pool-a-b":  "may not maintain every node pool it selects (nodemaint.dev/pool: pool-a, pool-b)",
				"erin-pool-a-or": byPoolOnly,
			}[name]
			expectRefused(t, err, want)
			expectAbsent(t, nm(name))
		}
		expectRefused(t, erin.Create(ctx, maintenance(nm("erin-all"), everyNode())), byPoolOnly)
		expectAbsent(t, nm("erin-all"))
		// Nor move her maintenance to pool-b.
		expectRefused(t, erin.Patch(ctx, a, mergePatch(`{"spec":{"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nodemaint.dev/pool","operator":"In","values":["pool-b"]}]}]}}}`)),
			"may not maintain every node pool it selects (nodemaint.dev/pool: pool-b, pool-a)")
		// Nor end pool-b's maintenance: neither uncordon it, move it to pool-a, nor delete it.
		b := maintenance(nm("admin-pool-b"), byPool("pool-b")...)
		b.Spec.Cordon = true
		create(t, admin, b)
		for _, patch := range []string{
			`{"spec":{"cordon":false}}`,
			`{"spec":{"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nodemaint.dev/pool","operator":"In","values":["pool-a"]}]}]}}}`,
		} {
			expectRefused(t, erin.Patch(ctx, b, mergePatch(patch)), "may not maintain every node pool it selects (nodemaint.dev/pool: ")
		}
		expectRefused(t, erin.Delete(ctx, b), "may not maintain every node pool it selects (nodemaint.dev/pool: pool-b)")
		var cur nodemaintv1alpha1.NodeMaintenance
		if err := admin.Get(ctx, client.ObjectKeyFromObject(b), &cur); err != nil || !cur.Spec.Cordon || cur.DeletionTimestamp != nil {
			t.Errorf("pool-b's maintenance after erin's refused changes: cordon %v, deleted at %v, %v", cur.Spec.Cordon, cur.DeletionTimestamp, err)
		}
		// Her own she may end.
		if err := erin.Delete(ctx, a); err != nil {
			t.Errorf("erin deleting her pool-a maintenance: %v", err)
		}
		// frank holds no pool.
		expectRefused(t, frank.Create(ctx, maintenance(nm("frank-pool-a"), byPool("pool-a")...)), "may not maintain every node pool it selects (nodemaint.dev/pool: pool-a)")
		expectAbsent(t, nm("frank-pool-a"))
		// A cluster admin, who could drain any node directly, is not limited.
		create(t, admin, maintenance(nm("admin-all"), everyNode()))
	})
}

// testDeleteFrozen proves that a maintenance with drainTimeoutAction: Delete, paused or draining,
// can be changed by a user who may not delete pods only to stop it, or deleted: a change of any
// field of its spec is refused, since whoever sets drain: true later deletes the pods that spec
// selects. A user who may delete pods may change every field.
func testDeleteFrozen(t *testing.T, nm func(string) string) {
	ctx := t.Context()
	suffix := strings.TrimPrefix(nm(""), "-")
	rights := rbacv1.PolicyRule{APIGroups: []string{nodemaintv1alpha1.GroupVersion.Group}, Resources: []string{"nodemaintenances"}, Verbs: []string{"get", "patch", "update", "delete"}}
	// gina may change and delete NodeMaintenances; hank may also delete pods.
	gina, hank := impersonate(t, "gina-"+suffix), impersonate(t, "hank-"+suffix)
	grant(t, "gina-"+suffix, rights)
	grant(t, "hank-"+suffix, rights, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})

	// The maintenances select a node that does not exist: nothing is cordoned or drained.
	base := func(name string, cordon, drain bool) *nodemaintv1alpha1.NodeMaintenance {
		m := maintenance(nm(name), byName("no-such-node")...)
		m.Spec.Cordon, m.Spec.Drain = cordon, drain
		m.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: 30 * time.Minute}
		m.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
		m.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}
		create(t, framework.Client(), m)
		return m
	}
	planned, paused, draining := base("frozen-planned", false, false), base("frozen-paused", true, false), base("frozen-draining", true, true)

	// One change of each field of the spec; the test fails when the spec has a field without one.
	// where: the maintenances the change is tried on (cordon and drain can only be turned on).
	type change struct {
		patch  string
		where  []*nodemaintv1alpha1.NodeMaintenance
		fields string // the fields the refusal names
	}
	all := []*nodemaintv1alpha1.NodeMaintenance{planned, paused, draining}
	changes := map[string]change{
		"nodeSelector":               {`{"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"Exists"}]}]}}`, all, "nodeSelector"},
		"cordon":                     {`{"cordon":true}`, []*nodemaintv1alpha1.NodeMaintenance{planned}, "cordon"},
		"drain":                      {`{"drain":true}`, []*nodemaintv1alpha1.NodeMaintenance{paused}, "drain"},
		"reason":                     {`{"reason":"other"}`, all, "reason"},
		"evacuationResponseTimeout":  {`{"evacuationResponseTimeout":"5m"}`, all, "evacuationResponseTimeout"},
		"evictionPolicy":             {`{"evictionPolicy":"SignalOnly"}`, all, "evictionPolicy"},
		"drainTimeout":               {`{"drainTimeout":"10m"}`, all, "drainTimeout"},
		"drainTimeoutAction":         {}, // Delete is its only value that is not a stop
		"shutdown":                   {`{"shutdown":{"applyOutOfServiceTaint":true}}`, all, "shutdown"},
		"drainLabelPolicy":           {`{"drainLabelPolicy":"Ignore"}`, all, "drainLabelPolicy"},
		"autoscalers":                {`{"autoscalers":"Ignore"}`, all, "autoscalers"},
		"podSelector":                {`{"podSelector":null}`, all, "podSelector"},
		"evictionGracePeriodSeconds": {`{"evictionGracePeriodSeconds":1}`, all, "evictionGracePeriodSeconds"},
		"rollout":                    {`{"rollout":{"maxUnavailable":1}}`, all, "rollout"},
	}
	for _, field := range reflect.VisibleFields(reflect.TypeFor[nodemaintv1alpha1.NodeMaintenanceSpec]()) {
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if _, ok := changes[name]; !ok {
			t.Errorf("spec field %s has no change in this test: add one, and make sure the policy nodemaint-drain-timeout-delete covers it", name)
		}
	}
	// Several at once, as the issue found them: widen a paused maintenance, then drain it.
	changes["widen"] = change{`{"podSelector":null,"drainLabelPolicy":"Ignore","evictionGracePeriodSeconds":1}`, all, "drainLabelPolicy, podSelector, evictionGracePeriodSeconds"}
	changes["stop and widen"] = change{`{"drain":false,"podSelector":null}`, []*nodemaintv1alpha1.NodeMaintenance{draining}, "podSelector"}
	changes["report and widen"] = change{`{"drainTimeoutAction":"Report","podSelector":null}`, all, "podSelector"}

	for name, c := range changes {
		for _, m := range c.where {
			patch := mergePatch(`{"spec":` + c.patch + `}`)
			expectRefused(t, gina.Patch(ctx, m.DeepCopy(), patch), frozen+c.fields+":")
			// hank may; dry-run, so that every change starts from the same maintenance.
			if err := hank.Patch(ctx, m.DeepCopy(), patch, client.DryRunAll); err != nil {
				t.Errorf("%s of %s by a user who may delete pods: %v", name, m.Name, err)
			}
		}
	}
	// The refused changes changed nothing.
	for _, m := range all {
		var cur nodemaintv1alpha1.NodeMaintenance
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(m), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Generation != 1 {
			t.Errorf("%s: generation %d after refused changes, want 1", m.Name, cur.Generation)
		}
	}

	// Stopping is allowed: drain: false; cordon: false with it; drainTimeoutAction Report or
	// removed; the same again (no change). So is a change outside the spec.
	for _, stop := range []struct {
		patch string
		where []*nodemaintv1alpha1.NodeMaintenance
	}{
		{`{"spec":{"drain":false}}`, []*nodemaintv1alpha1.NodeMaintenance{draining}},
		{`{"spec":{"cordon":false,"drain":false}}`, []*nodemaintv1alpha1.NodeMaintenance{paused, draining}},
		{`{"spec":{"drainTimeoutAction":"Report"}}`, all},
		{`{"spec":{"drainTimeoutAction":null}}`, all},
		{`{"spec":{"drain":false,"drainTimeoutAction":"Report"}}`, []*nodemaintv1alpha1.NodeMaintenance{draining}},
		{`{"spec":{"reason":"admission e2e"}}`, all},
		{`{"metadata":{"labels":{"team":"a"}}}`, all},
	} {
		for _, m := range stop.where {
			if err := gina.Patch(ctx, m.DeepCopy(), mergePatch(stop.patch), client.DryRunAll); err != nil {
				t.Errorf("%s of %s by a user who may not delete pods: %v", stop.patch, m.Name, err)
			}
		}
	}
	// And for real: stop the drain, then delete it.
	if err := gina.Patch(ctx, draining, mergePatch(`{"spec":{"drain":false}}`)); err != nil {
		t.Errorf("stopping %s: %v", draining.Name, err)
	}
	if err := gina.Delete(ctx, draining); err != nil {
		t.Errorf("deleting %s: %v", draining.Name, err)
	}
}

// impersonate returns a client that acts as user, in groups.
func impersonate(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := framework.Cluster().RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant gives user rules in every namespace, until the test ends.
func grant(t *testing.T, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := "e2e-" + user
	create(t, framework.Client(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
	create(t, framework.Client(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	})
}

// grantIn gives user rules in namespace ns, until the test ends.
func grantIn(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := "e2e-" + user
	create(t, framework.Client(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules})
	create(t, framework.Client(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	})
}

// create creates obj with c, and deletes it (as cluster admin) when the test ends.
func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := framework.Client().Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// maintenance returns a NodeMaintenance in its Planning phase selecting terms.
func maintenance(name string, terms ...corev1.NodeSelectorTerm) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: terms},
			Reason:       "admission e2e",
		},
	}
}

// deleting returns a NodeMaintenance of one node that asks for drainTimeoutAction: Delete.
func deleting(name string) *nodemaintv1alpha1.NodeMaintenance {
	m := maintenance(name, byName("node-0")...)
	m.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: 30 * time.Minute}
	m.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
	return m
}

func byName(node string) []corev1.NodeSelectorTerm {
	return []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}
}

func byPool(pools ...string) []corev1.NodeSelectorTerm {
	return byLabel("nodemaint.dev/pool", pools...)
}

// byLabel selects the nodes whose label key has one of values.
func byLabel(key string, values ...string) []corev1.NodeSelectorTerm {
	return []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}
}

func everyNode() corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpExists}}}
}

func mergePatch(s string) client.Patch {
	return client.RawPatch("application/merge-patch+json", []byte(s))
}

// expectRefused fails unless err is the API server's refusal (403) with a message containing want.
func expectRefused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("allowed; want refused with %q", want)
		return
	}
	refused := true
	if !apierrors.IsForbidden(err) {
		t.Errorf("error %v; want Forbidden", err)
		refused = false
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %v; want a message with %q", err, want)
		refused = false
	}
	if !refused {
		return
	}
	t.Logf("refused: %v", err)
}

// expectAbsent fails when the NodeMaintenance exists.
func expectAbsent(t *testing.T, name string) {
	t.Helper()
	err := framework.Client().Get(t.Context(), client.ObjectKey{Name: name}, &nodemaintv1alpha1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance %s: %v, want NotFound", name, err)
	}
}

// waitRefused waits until c's dry-run create of obj is refused with want: the policy is enforced.
func waitRefused(t *testing.T, c client.Client, obj client.Object, want string) {
	t.Helper()
	testutil.Eventually(t, policyTimeout, "the policy refusing "+obj.GetName(), func(ctx context.Context) (bool, string, error) {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), want) {
			return true, "", nil
		}
		return false, "", err
	})
}

// expectTypeChecked fails when the API server found type errors in the policy's expressions
// (against the CRD's schema), once it checked them.
func expectTypeChecked(t *testing.T, name string) {
	t.Helper()
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	testutil.Eventually(t, policyTimeout, "policy "+name+" type-checked", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, &policy)
		return policy.Status.ObservedGeneration == policy.Generation && policy.Status.TypeChecking != nil, "", err
	})
	for _, w := range policy.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("policy %s: %s: %s", name, w.FieldRef, w.Warning)
	}
}

// renderKustomize returns what kubectl kustomize renders of dir.
func renderKustomize(t *testing.T, dir string) string {
	t.Helper()
	out, err := framework.Kubectl(t, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return out
}

// apply applies manifests (server-side) until the test ends, then deletes them. With a probe, a
// user who may only create NodeMaintenances, it then waits until the API server lets the probe
// ask for drainTimeoutAction: Delete again: the admission policies are no longer enforced, and
// no later test sees them.
func apply(t *testing.T, manifests string, probe client.Client) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Kubectl(t, "apply", "--server-side", "--field-manager=install-test", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := framework.Kubectl(t, "delete", "--ignore-not-found", "-f", file); err != nil {
			t.Errorf("kubectl delete: %v\n%s", err, out)
		}
		if probe == nil {
			return
		}
		// t.Context() is done by now.
		var last error
		err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, policyTimeout, true, func(ctx context.Context) (bool, error) {
			last = probe.Create(ctx, deleting("policies-gone"), client.DryRunAll)
			return last == nil, nil
		})
		if err != nil {
			t.Errorf("the policies are still enforced %v after their deletion: %v", policyTimeout, last)
		}
	})
}

func relTo(t *testing.T, base, target string) string {
	t.Helper()
	r, err := filepath.Rel(base, target)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The admission policies of config/admission, and their bindings, by name.
const (
	deleteGuard      = "nodemaint-drain-timeout-delete"
	nodeScope        = "nodemaint-node-scope"
	controllerWrites = "nodemaint-controller-writes"
)

// withoutControllerWrites drops the policy nodemaint-controller-writes and its binding from
// manifests: the framework installs them for every test of the package (test/manifests), and a
// test that applies and then deletes config/admission must leave them.
func withoutControllerWrites(t *testing.T, manifests string) string {
	t.Helper()
	decoded, err := testmanifests.Decode(strings.NewReader(manifests))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, obj := range decoded {
		if obj.GetName() == controllerWrites {
			continue
		}
		b, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteString("\n")
	}
	return out.String()
}

// policyObjects returns, sorted, the keys of the admission policies, their bindings and the
// node-scope ConfigMap among objs.
func policyObjects(objs map[string]*unstructured.Unstructured) []string {
	var out []string
	for k, obj := range objs {
		switch {
		case obj.GetKind() == "ValidatingAdmissionPolicy", obj.GetKind() == "ValidatingAdmissionPolicyBinding",
			obj.GetKind() == "ConfigMap" && strings.HasSuffix(obj.GetName(), "-node-scope"):
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkPolicies checks the admission policies among objs, named prefix-drain-timeout-delete and
// prefix-node-scope: their specs are those of config/admission, each has a binding that denies,
// and the node-scope binding takes its parameters from the ConfigMap prefix-node-scope in ns,
// refusing everything without it.
func checkPolicies(t *testing.T, objs map[string]*unstructured.Unstructured, prefix, ns string) {
	t.Helper()
	files := map[string]string{
		prefix + "-drain-timeout-delete": repoPath("config", "admission", "drain_timeout_delete_policy.yaml"),
		prefix + "-node-scope":           repoPath("config", "admission", "node-scope", "node_scope_policy.yaml"),
		prefix + "-controller-writes":    repoPath("config", "admission", "controller-writes", "controller_writes_policy.yaml"),
	}
	for _, policy := range kinds(objs, "ValidatingAdmissionPolicy") {
		name := policy.GetName()
		file, ok := files[name]
		if !ok {
			t.Errorf("unexpected ValidatingAdmissionPolicy %s", name)
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want := kinds(parse(t, string(b)), "ValidatingAdmissionPolicy")
		if len(want) != 1 {
			t.Fatalf("%s: %d policies, want 1", file, len(want))
		}
		wantSpec := want[0].Object["spec"].(map[string]any)
		if _, chart := policy.GetLabels()["helm.sh/chart"]; chart && name == prefix+"-controller-writes" {
			// The chart binds it to its release's ServiceAccount exactly.
			wantSpec["matchConditions"] = []any{map[string]any{"name": "nodemaint-controller",
				"expression": "request.userInfo.username == 'system:serviceaccount:" + ns + ":" + prefix + "-controller'"}}
		}
		if !reflect.DeepEqual(policy.Object["spec"], wantSpec) {
			t.Errorf("policy %s differs from %s:\n  got  %v\n  want %v", name, file, policy.Object["spec"], want[0].Object["spec"])
		}
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		decode(t, objs["ValidatingAdmissionPolicyBinding/"+name], &binding)
		if binding.Spec.PolicyName != name {
			t.Errorf("binding %s: policy %q, want %s", name, binding.Spec.PolicyName, name)
		}
		if !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
			t.Errorf("binding %s: actions %v, want [Deny]", name, binding.Spec.ValidationActions)
		}
		if name != prefix+"-node-scope" {
			continue
		}
		ref := binding.Spec.ParamRef
		if ref == nil {
			t.Errorf("binding %s: no paramRef; want ConfigMap %s/%s, Deny when missing", name, ns, name)
		} else {
			if ref.Name != name {
				t.Errorf("binding %s paramRef name %q, want %s", name, ref.Name, name)
			}
			if ref.Namespace != ns {
				t.Errorf("binding %s paramRef namespace %q, want %s", name, ref.Namespace, ns)
			}
			if got := ptr.Deref(ref.ParameterNotFoundAction, ""); got != admissionregistrationv1.DenyAction {
				t.Errorf("binding %s paramRef parameterNotFoundAction %q, want Deny when missing", name, got)
			}
		}
		cm := objs["ConfigMap/"+ns+"/"+name]
		if cm == nil {
			t.Errorf("no ConfigMap %s/%s for policy %s", ns, name, name)
		} else if key, _, _ := unstructured.NestedString(cm.Object, "data", "labelKey"); key == "" {
			t.Errorf("ConfigMap %s/%s has no labelKey", ns, name)
		}
	}
	if len(kinds(objs, "ValidatingAdmissionPolicyBinding")) != len(kinds(objs, "ValidatingAdmissionPolicy")) {
		t.Errorf("%d bindings for %d policies", len(kinds(objs, "ValidatingAdmissionPolicyBinding")), len(kinds(objs, "ValidatingAdmissionPolicy")))
	}
}
