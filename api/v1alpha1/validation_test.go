package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// create sends the YAML object to the real API server.
func create(t *testing.T, name, doc string) error {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	obj.SetName(name)
	return env.Client.Create(context.Background(), obj)
}

const validSelector = `
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - {key: kubernetes.io/hostname, operator: In, values: [node-1]}`

func TestNodeMaintenanceValidation(t *testing.T) {
	cases := []struct {
		name, spec string
		wantErr    string // "" means the object is accepted
	}{
		{"valid planning", validSelector, ""},
		{"valid drain", validSelector + "\n  cordon: true\n  drain: true\n  reason: kernel upgrade", ""},
		{"drain without cordon", validSelector + "\n  drain: true", "drain: true requires cordon: true"},
		{"no node selector", "\n  cordon: true", "spec.nodeSelector: Required value"},
		{"no selector terms", "\n  nodeSelector: {nodeSelectorTerms: []}", "nodeSelector must have at least one nodeSelectorTerm"},
		{"empty selector term", "\n  nodeSelector: {nodeSelectorTerms: [{}]}", "every nodeSelectorTerm needs matchExpressions or matchFields"},
		{"several names in one field requirement", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [a, b]}]}]}", ""},
		{"several names NotIn", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [a, b, c]}]}]}", ""},
		{"256 names in one field requirement", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [" + nodeNames(256) + "]}]}]}", ""},
		{"257 names in one field requirement", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [" + nodeNames(257) + "]}]}]}", "must have at most 256 items"},
		{"field requirement with empty values", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: []}]}]}", "1 to 256 node names"},
		{"unsupported field", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: spec.unschedulable, operator: In, values: [a]}]}]}", "matchFields supports only metadata.name"},
		{"one name per term", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [a]}]}, {matchFields: [{key: metadata.name, operator: In, values: [b]}]}]}", ""},
		{"unknown operator", "\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Equals, values: [b]}]}]}", `Unsupported value: "Equals"`},
		{"too many terms", "\n  nodeSelector:\n    nodeSelectorTerms:" + strings.Repeat("\n    - matchExpressions: [{key: a, operator: Exists}]", 17), "spec.nodeSelector.nodeSelectorTerms: Too many"},
		{"reason too long", validSelector + "\n  reason: " + strings.Repeat("x", 1025), "spec.reason: Too long"},
		{"unknown eviction policy", validSelector + "\n  evictionPolicy: Sometimes", `spec.evictionPolicy: Unsupported value: "Sometimes"`},
		{"bad duration", validSelector + "\n  evacuationResponseTimeout: three minutes", "spec.evacuationResponseTimeout"},
		{"delete without drain timeout", validSelector + "\n  drainTimeoutAction: Delete", "drainTimeoutAction: Delete requires drainTimeout"},
		{"delete with drain timeout", validSelector + "\n  drainTimeout: 1h\n  drainTimeoutAction: Delete", ""},
		{"report without drain timeout", validSelector + "\n  drainTimeoutAction: Report", ""},
		{"unknown drain timeout action", validSelector + "\n  drainTimeout: 1h\n  drainTimeoutAction: Evict", `spec.drainTimeoutAction: Unsupported value: "Evict"`},
		{"bad drain timeout", validSelector + "\n  drainTimeout: forever", "spec.drainTimeout"},
		{"bad not-ready grace period", validSelector + "\n  shutdown: {applyOutOfServiceTaint: true, notReadyGracePeriod: soon}", "spec.shutdown.notReadyGracePeriod"},
		{"signal only", validSelector + "\n  cordon: true\n  drain: true\n  evictionPolicy: SignalOnly", ""},
		{"reason at its limit", validSelector + "\n  reason: " + strings.Repeat("x", 1024), ""},
		{"node selector not an object", "\n  nodeSelector: rack-7", "spec.nodeSelector: Invalid value"},
		{"cordon not a boolean", validSelector + "\n  cordon: yes please", "spec.cordon: Invalid value"},
		{"field requirement without values", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In}]}]}", "matchFields supports only metadata.name"},
		{"field requirement with Exists", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: Exists}]}]}", "matchFields supports only metadata.name"},
		{"field requirement NotIn one name", "\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [a]}]}]}", ""},
		{"expression and field in one term", "\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}], matchFields: [{key: metadata.name, operator: In, values: [b]}]}]}", ""},
		{"terms at their limit", "\n  nodeSelector:\n    nodeSelectorTerms:" + strings.Repeat("\n    - matchExpressions: [{key: a, operator: Exists}]", 16), ""},
		{"too many requirements in a term", "\n  nodeSelector:\n    nodeSelectorTerms:\n    - matchExpressions:" + strings.Repeat("\n      - {key: a, operator: Exists}", 33), "matchExpressions: Too many"},
		{"too many values", "\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In, values: [" + strings.TrimSuffix(strings.Repeat("v,", 257), ",") + "]}]}]}", "values: Too many"},
		{"alerts by name", validSelector + "\n  rollout: {haltOnAlerts: {alertNames: [KubeNodeNotReady]}}", ""},
		{"alerts by labels", validSelector + "\n  rollout: {haltOnAlerts: {matchLabels: {severity: critical}}}", ""},
		{"preflight Block", validSelector + "\n  rollout: {preflight: Block}", ""},
		{"preflight Warn", validSelector + "\n  rollout: {preflight: Warn}", ""},
		{"unknown preflight policy", validSelector + "\n  rollout: {preflight: Refuse}", `spec.rollout.preflight: Unsupported value: "Refuse"`},
		{"alerts selecting nothing", validSelector + "\n  rollout: {haltOnAlerts: {}}", "haltOnAlerts needs alertNames, matchLabels or both"},
		{"alert name empty", validSelector + "\n  rollout: {haltOnAlerts: {alertNames: ['']}}", "alertNames[0]"},
		{"autoscalers ignored", validSelector + "\n  autoscalers: Ignore", ""},
		{"unknown autoscaler policy", validSelector + "\n  autoscalers: Sometimes", `spec.autoscalers: Unsupported value: "Sometimes"`},
		{"soak", validSelector + "\n  rollout: {soakTime: 30s}", ""},
		{"no soak", validSelector + "\n  rollout: {soakTime: 0s}", ""},
		{"soak in days", validSelector + "\n  rollout: {soakTime: 1d}", "soakTime must be a duration between 0s and 24h"},
		{"soak too long", validSelector + "\n  rollout: {soakTime: 24h1s}", "soakTime must be a duration between 0s and 24h"},
		{"soak negative", validSelector + "\n  rollout: {soakTime: -1s}", "soakTime must be a duration between 0s and 24h"},
		{"blocked nodes", validSelector + "\n  drainTimeout: 1h\n  rollout: {maxBlockedNodes: 3}", ""},
		{"blocked nodes without drain timeout", validSelector + "\n  rollout: {maxBlockedNodes: 3}", "rollout.maxBlockedNodes requires drainTimeout"},
		{"no blocked nodes without drain timeout", validSelector + "\n  rollout: {maxBlockedNodes: 0}", ""},
		{"blocked nodes negative", validSelector + "\n  drainTimeout: 1h\n  rollout: {maxBlockedNodes: -1}", "spec.rollout.maxBlockedNodes: Invalid value: -1: spec.rollout.maxBlockedNodes in body should be greater than or equal to 0"},
		{"blocked nodes too many", validSelector + "\n  drainTimeout: 1h\n  rollout: {maxBlockedNodes: 101}", "spec.rollout.maxBlockedNodes in body should be less than or equal to 100"},
		{"key too long", "\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: " + strings.Repeat("k", 317) + ", operator: Exists}]}]}", "key: Too long"},
	}
	// Every duration field refuses what Go's time.ParseDuration cannot parse and what is out of
	// bounds, naming the bounds; the controller could not decode the first kind (issue 16).
	durations := []struct{ field, yaml, bounds, over string }{
		{"evacuationResponseTimeout", "\n  evacuationResponseTimeout: %s", "between 1s and 24h", "24h1s"},
		{"drainTimeout", "\n  drainTimeout: %s", "between 1s and 168h", "168h1s"},
		{"notReadyGracePeriod", "\n  shutdown: {applyOutOfServiceTaint: true, notReadyGracePeriod: %s}", "between 1s and 24h", "25h"},
	}
	for _, d := range durations {
		for _, bad := range []string{"1d", "2 days", "1w", "0s", "-1s", `""`, "999ms", d.over, "1h1d"} {
			cases = append(cases, struct{ name, spec, wantErr string }{
				d.field + " " + bad, validSelector + fmt.Sprintf(d.yaml, bad), d.field + " must be a duration " + d.bounds})
		}
		for _, good := range []string{"1h0m0s", "90s", "1.5h", "1s", "24h", "500ms1s"} {
			cases = append(cases, struct{ name, spec, wantErr string }{d.field + " " + good, validSelector + fmt.Sprintf(d.yaml, good), ""})
		}
	}
	cases = append(cases, []struct{ name, spec, wantErr string }{
		{"drainTimeout at its limit", validSelector + "\n  drainTimeout: 168h", ""},
		{"delete after 3s", validSelector + "\n  drainTimeout: 3s\n  drainTimeoutAction: Delete", "drainTimeoutAction: Delete requires a drainTimeout of at least 5m and at least evacuationResponseTimeout (default 3m)"},
		{"delete just under 5m", validSelector + "\n  drainTimeout: 4m59s\n  drainTimeoutAction: Delete", "drainTimeout of at least 5m"},
		{"delete at 5m", validSelector + "\n  drainTimeout: 5m\n  drainTimeoutAction: Delete", ""},
		{"delete before the owners could answer", validSelector + "\n  evacuationResponseTimeout: 10m\n  drainTimeout: 9m\n  drainTimeoutAction: Delete", "at least evacuationResponseTimeout"},
		{"delete once the owners could answer", validSelector + "\n  evacuationResponseTimeout: 10m\n  drainTimeout: 10m\n  drainTimeoutAction: Delete", ""},
		{"report after 3s", validSelector + "\n  drainTimeout: 3s\n  drainTimeoutAction: Report", ""},
		{"delete with a bad drain timeout", validSelector + "\n  drainTimeout: 1d\n  drainTimeoutAction: Delete", "drainTimeout must be a duration between 1s and 168h"},
	}...)
	// spec.podSelector refuses what metav1.LabelSelectorAsSelector cannot parse, as a DrainRule's
	// selectors do; spec.evictionGracePeriodSeconds is 1 to 86400, never 0 (no grace at all).
	cases = append(cases, []struct{ name, spec, wantErr string }{
		{"pod selector", validSelector + "\n  podSelector: {matchLabels: {app: web}, matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}", ""},
		{"empty pod selector", validSelector + "\n  podSelector: {}", ""},
		{"pod selector unknown operator", validSelector + "\n  podSelector: {matchExpressions: [{key: app, operator: Gt, values: ['1']}]}",
			`spec.podSelector.matchExpressions[0].operator: Unsupported value: "Gt"`},
		{"pod selector In without values", validSelector + "\n  podSelector: {matchExpressions: [{key: app, operator: In}]}",
			"spec.podSelector.matchExpressions[0]: Invalid value: operators In and NotIn need values"},
		{"pod selector bad key", validSelector + "\n  podSelector: {matchLabels: {'app name': web}}",
			"spec.podSelector.matchLabels: Invalid value: every key must be a valid label key"},
		{"pod selector bad value", validSelector + "\n  podSelector: {matchLabels: {app: 'a b'}}",
			`spec.podSelector.matchLabels[app]: Invalid value: "a b": must be a valid label value`},
		{"pod selector too many requirements", validSelector + "\n  podSelector: {matchExpressions: [" + strings.TrimSuffix(strings.Repeat("{key: a, operator: Exists},", 17), ",") + "]}",
			"spec.podSelector.matchExpressions: Too many"},
		{"pod selector not an object", validSelector + "\n  podSelector: app=web", "spec.podSelector: Invalid value"},
		{"grace period", validSelector + "\n  evictionGracePeriodSeconds: 10", ""},
		{"grace period at its limits", validSelector + "\n  evictionGracePeriodSeconds: 86400", ""},
		{"grace period of one second", validSelector + "\n  evictionGracePeriodSeconds: 1", ""},
		{"grace period zero", validSelector + "\n  evictionGracePeriodSeconds: 0", "evictionGracePeriodSeconds must be between 1 and 86400 (24h); 0 would kill the pods at once"},
		{"grace period negative", validSelector + "\n  evictionGracePeriodSeconds: -1", "evictionGracePeriodSeconds must be between 1 and 86400"},
		{"grace period too long", validSelector + "\n  evictionGracePeriodSeconds: 86401", "evictionGracePeriodSeconds must be between 1 and 86400"},
		{"grace period not a number", validSelector + "\n  evictionGracePeriodSeconds: 30s", "spec.evictionGracePeriodSeconds: Invalid value"},
	}...)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: nodemaint.dev/v1alpha1\nkind: NodeMaintenance\nspec:" + tc.spec
			name := fmt.Sprintf("nm-validation-%d", i)
			err := create(t, name, doc)
			checkErr(t, err, tc.wantErr)
			checkCreated(t, &nodemaintv1alpha1.NodeMaintenance{}, name, tc.wantErr == "")
		})
	}
}

func TestDrainRuleValidation(t *testing.T) {
	const pods = "\n  pods:\n  - selector: {matchLabels: {app: db}}"
	cases := []struct {
		name, spec string
		wantErr    string
	}{
		{"valid drain with order", "\n  drain: {behavior: Drain, order: 100}" + pods, ""},
		{"valid skip", "\n  drain: {behavior: Skip}" + pods, ""},
		{"valid wait completed on some nodes", "\n  drain: {behavior: WaitCompleted}\n  nodes:\n  - selector: {matchLabels: {pool: gpu}}" + pods, ""},
		{"order with skip", "\n  drain: {behavior: Skip, order: 1}" + pods, "order can only be set when behavior is Drain"},
		{"unknown behavior", "\n  drain: {behavior: Evict}" + pods, `spec.drain.behavior: Unsupported value: "Evict"`},
		{"no pods", "\n  drain: {behavior: Skip}", "spec.pods: Required value"},
		{"empty pod selector entry", "\n  drain: {behavior: Skip}\n  pods: [{}]", "spec.pods[0]: Invalid value"},
		{"too many pod selectors", "\n  drain: {behavior: Skip}\n  pods:" + strings.Repeat("\n  - selector: {}", 33), "spec.pods: Too many"},
		{"pod selectors at their limit", "\n  drain: {behavior: Skip}\n  pods:" + strings.Repeat("\n  - selector: {}", 32), ""},
		{"no pod selector", "\n  drain: {behavior: Skip}\n  pods: []", "spec.pods: Invalid value"},
		{"namespace selector only", "\n  drain: {behavior: Skip}\n  pods: [{namespaceSelector: {matchLabels: {team: a}}}]", ""},
		{"order with wait completed", "\n  drain: {behavior: WaitCompleted, order: 1}" + pods, "order can only be set when behavior is Drain"},
		{"order too high", "\n  drain: {behavior: Drain, order: 1000001}" + pods, "spec.drain.order: Invalid value"},
		{"order too low", "\n  drain: {behavior: Drain, order: -1000001}" + pods, "spec.drain.order: Invalid value"},
		{"order at its limits", "\n  drain: {behavior: Drain, order: -1000000}" + pods, ""},
		{"order not a number", "\n  drain: {behavior: Drain, order: first}" + pods, "spec.drain.order: Invalid value"},
		{"no behavior", "\n  drain: {order: 1}" + pods, "spec.drain.behavior: Required value"},
		{"no drain", pods, "spec.drain: Required value"},
		{"no spec", "", "spec: Required value"},
		{"empty node list", "\n  drain: {behavior: Skip}\n  nodes: []" + pods, "spec.nodes: Invalid value"},
		{"node entry without selector", "\n  drain: {behavior: Skip}\n  nodes: [{}]" + pods, "spec.nodes[0].selector: Required value"},
		{"too many node selectors", "\n  drain: {behavior: Skip}\n  nodes:" + strings.Repeat("\n  - selector: {}", 33) + pods, "spec.nodes: Too many"},
	}
	// Every label selector refuses what metav1.LabelSelectorAsSelector cannot parse: such a rule
	// would match nothing, and a Skip rule would protect no pod (issue 16).
	selectors := []struct{ where, yaml string }{
		{"spec.nodes[0].selector", "\n  drain: {behavior: Skip}\n  nodes: [{selector: %s}]" + pods},
		{"spec.pods[0].selector", "\n  drain: {behavior: Skip}\n  pods: [{selector: %s}]"},
		{"spec.pods[0].namespaceSelector", "\n  drain: {behavior: Skip}\n  pods: [{namespaceSelector: %s}]"},
	}
	for _, sel := range selectors {
		const values = ": Invalid value: operators In and NotIn need values; Exists and DoesNotExist take none"
		for _, c := range []struct{ name, selector, wantErr string }{
			{"unknown operator", "{matchExpressions: [{key: app, operator: Equals, values: [db]}]}", `.matchExpressions[0].operator: Unsupported value: "Equals"`},
			{"node selector operator", "{matchExpressions: [{key: app, operator: Gt, values: ['1']}]}", `.matchExpressions[0].operator: Unsupported value: "Gt"`},
			{"In without values", "{matchExpressions: [{key: app, operator: In}]}", ".matchExpressions[0]" + values},
			{"NotIn with no values", "{matchExpressions: [{key: app, operator: NotIn, values: []}]}", ".matchExpressions[0]" + values},
			{"Exists with values", "{matchExpressions: [{key: app, operator: Exists, values: [db]}]}", ".matchExpressions[0]" + values},
			{"DoesNotExist with values", "{matchExpressions: [{key: app, operator: DoesNotExist, values: [db]}]}", ".matchExpressions[0]" + values},
			{"bad key", "{matchExpressions: [{key: 'app name', operator: Exists}]}", `.matchExpressions[0].key: Invalid value: "app name": must be a valid label key`},
			{"bad key prefix", "{matchExpressions: [{key: 'Example.COM_/app', operator: Exists}]}", `.matchExpressions[0].key: Invalid value: "Example.COM_/app": must be a valid label key`},
			{"bad value", "{matchExpressions: [{key: app, operator: In, values: ['-db']}]}", `.matchExpressions[0].values[0]: Invalid value: "-db": must be a valid label value`},
			{"value too long", "{matchExpressions: [{key: app, operator: In, values: [" + strings.Repeat("v", 64) + "]}]}", ".matchExpressions[0].values[0]: Too long"},
			{"too many values", "{matchExpressions: [{key: app, operator: In, values: [" + strings.TrimSuffix(strings.Repeat("v,", 33), ",") + "]}]}", ".matchExpressions[0].values: Too many"},
			{"too many requirements", "{matchExpressions: [" + strings.TrimSuffix(strings.Repeat("{key: a, operator: Exists},", 17), ",") + "]}", ".matchExpressions: Too many"},
			{"bad matchLabels key", "{matchLabels: {'app name': db}}", ".matchLabels: Invalid value: every key must be a valid label key"},
			{"bad matchLabels value", "{matchLabels: {app: 'a b'}}", `.matchLabels[app]: Invalid value: "a b": must be a valid label value`},
			{"valid In", "{matchExpressions: [{key: app, operator: In, values: [db, cache]}]}", ""},
			{"valid prefixed key, empty value", "{matchExpressions: [{key: example.com/tier, operator: NotIn, values: ['']}]}", ""},
			{"valid Exists", "{matchExpressions: [{key: app, operator: Exists}], matchLabels: {example.com/team: a.b_c-d}}", ""},
			{"valid DoesNotExist with empty values", "{matchExpressions: [{key: app, operator: DoesNotExist, values: []}]}", ""},
			{"limits", "{matchExpressions: [" + strings.TrimSuffix(strings.Repeat("{key: a, operator: In, values: ["+strings.TrimSuffix(strings.Repeat(strings.Repeat("v", 63)+",", 32), ",")+"]},", 16), ",") + "]}", ""},
		} {
			want := c.wantErr
			if want != "" {
				want = sel.where + want
			}
			cases = append(cases, struct{ name, spec, wantErr string }{sel.where + " " + c.name, fmt.Sprintf(sel.yaml, c.selector), want})
		}
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: nodemaint.dev/v1alpha1\nkind: DrainRule\nspec:" + tc.spec
			name := fmt.Sprintf("dr-validation-%d", i)
			err := create(t, name, doc)
			checkErr(t, err, tc.wantErr)
			checkCreated(t, &nodemaintv1alpha1.DrainRule{}, name, tc.wantErr == "")
		})
	}
}

// checkCreated checks that a refused object left nothing behind, and that an accepted one exists.
func checkCreated(t *testing.T, obj client.Object, name string, want bool) {
	t.Helper()
	err := env.Client.Get(context.Background(), types.NamespacedName{Name: name}, obj)
	switch {
	case want && err != nil:
		t.Fatalf("accepted object not found: %v", err)
	case !want && !apierrors.IsNotFound(err):
		t.Fatalf("refused object: want NotFound, got %v", err)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("valid object refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("invalid object accepted; want an error containing %q", want)
	case want != "" && !apierrors.IsInvalid(err):
		t.Fatalf("want an Invalid error containing %q, got %v", want, err)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error does not say %q:\n%v", want, err)
	}
}

// TestNodeMaintenanceDefaults checks that a minimal object round-trips with the defaults applied by
// the API server.
func TestNodeMaintenanceDefaults(t *testing.T) {
	ctx := context.Background()
	err := create(t, "nm-defaults", "apiVersion: nodemaint.dev/v1alpha1\nkind: NodeMaintenance\nspec:"+validSelector+
		"\n  shutdown: {applyOutOfServiceTaint: true}\n  rollout: {}")
	if err != nil {
		t.Fatal(err)
	}
	var nm nodemaintv1alpha1.NodeMaintenance
	if err := env.Client.Get(ctx, types.NamespacedName{Name: "nm-defaults"}, &nm); err != nil {
		t.Fatal(err)
	}
	if nm.Spec.Cordon || nm.Spec.Drain {
		t.Errorf("cordon and drain default to false, got %v and %v", nm.Spec.Cordon, nm.Spec.Drain)
	}
	if nm.Spec.EvacuationResponseTimeout == nil || nm.Spec.EvacuationResponseTimeout.Duration != 3*time.Minute {
		t.Errorf("evacuationResponseTimeout defaults to 3m, got %v", nm.Spec.EvacuationResponseTimeout)
	}
	if nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicyEvict {
		t.Errorf("evictionPolicy defaults to Evict, got %q", nm.Spec.EvictionPolicy)
	}
	if nm.Spec.Autoscalers != nodemaintv1alpha1.AutoscalerPolicyHold {
		t.Errorf("autoscalers defaults to Hold, got %q", nm.Spec.Autoscalers)
	}
	if nm.Spec.Shutdown == nil || nm.Spec.Shutdown.NotReadyGracePeriod == nil || nm.Spec.Shutdown.NotReadyGracePeriod.Duration != time.Minute {
		t.Errorf("shutdown.notReadyGracePeriod defaults to 1m, got %+v", nm.Spec.Shutdown)
	}
	if nm.Spec.Rollout == nil || nm.Spec.Rollout.Preflight != nodemaintv1alpha1.PreflightWarn {
		t.Errorf("rollout.preflight defaults to Warn, got %+v", nm.Spec.Rollout)
	}
	if got := nm.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values; len(got) != 1 || got[0] != "node-1" {
		t.Errorf("nodeSelector did not round-trip: %+v", nm.Spec.NodeSelector)
	}

	// The typed client round-trips too, and an update that breaks a rule is refused.
	nm.Spec.Drain = true
	err = env.Client.Update(ctx, &nm)
	checkErr(t, err, "drain: true requires cordon: true")
	nm.Spec.Cordon = true
	if err := env.Client.Update(ctx, &nm); err != nil {
		t.Fatalf("cordon+drain refused: %v", err)
	}
}

// nodeNames is "node-0, node-1, ...", n of them, for a YAML flow sequence.
func nodeNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
	}
	return strings.Join(names, ", ")
}
