package drain_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// appOwner is a user of the namespace alone: a ServiceAccount bound there (RoleBinding) to the
// aggregated ClusterRole edit, as an application team is. It returns the path of its kubeconfig
// (a TokenRequest's token) and its clientset.
func appOwner(t *testing.T, ns string) (string, kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-owner"}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-owner-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	create(t, sa, rb)
	token, err := framework.ServiceAccountToken(ctx, ns, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := framework.Cluster().WriteKubeconfig(path, &clientcmdapi.AuthInfo{Token: token}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, kubernetes.NewForConfigOrDie(cfg)
}

// TestAppOwnersSeeWhyTheDrainWaits: a Deployment that cannot surge (maxSurge 0: the responder
// declines, and its pods are evicted) behind a budget that allows no disruption
// (minAvailable = replicas) holds a node's drain. A user who may edit the namespace alone, and
// reads neither nodes nor NodeMaintenances, sees why in the namespace's Events: a Warning on the
// budget and one on the Deployment, naming the node, the maintenance and what would unblock it.
// Looked at again and again meanwhile, the drain makes no other Event of them.
func TestAppOwnersSeeWhyTheDrainWaits(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	ns := framework.Namespace(t)
	controller := framework.NewController(t)
	controller.Start()
	kubeconfig, owner := appOwner(t, ns)
	drained := node(3)
	web := framework.NewDeployment(ns, "web", 2)
	web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
	}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: web.Spec.Selector}}
	onlyOn(t, drained, func() {
		create(t, pdb)
		framework.CreateDeployment(t, web)
	})
	createDrainNM(t, "appowners", drained)

	// As the namespace's user: the Events API, and kubectl get events.
	var seen []eventsv1.Event
	testutil.Eventually(t, timeout, "the budget's and the Deployment's Warnings, as the namespace's user", func(ctx context.Context) (bool, string, error) {
		var err error
		seen, err = appOwnerEvents(ctx, owner, ns)
		if err != nil {
			return false, "", err
		}
		return regards(seen, "PodDisruptionBudget", "web") != nil && regards(seen, "Deployment", "web") != nil, fmt.Sprint(notes(seen)), nil
	})
	for _, kind := range []string{"PodDisruptionBudget", "Deployment"} {
		ev := regards(seen, kind, "web")
		for _, want := range []string{"NodeMaintenance appowners", "node " + drained, "allows 0 disruptions: 2 of 2 pods healthy, minAvailable 2", "scale up or relax the budget"} {
			if !strings.Contains(ev.Note, want) {
				t.Errorf("%s web: note %q does not say %q", kind, ev.Note, want)
			}
		}
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("%s web: %s Event, want a Warning", kind, ev.Type)
		}
		if ev.Related == nil || ev.Related.Kind != "NodeMaintenance" || ev.Related.Name != "appowners" {
			t.Errorf("%s web: Event related to %+v, want related to the NodeMaintenance appowners", kind, ev.Related)
		}
	}
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(framework.Cluster().BinDir(), "kubectl"), args...)
		cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s as the namespace's user: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := kubectl("get", "events", "-n", ns, "--field-selector", "reason="+nodedecide.ReasonBudgetBlocksDrain,
		"-o", "custom-columns=TYPE:.type,OBJECT:.involvedObject.kind,NAME:.involvedObject.name,MESSAGE:.message")
	t.Logf("kubectl get events -n %s, as the namespace's user:\n%s", ns, out)
	if !strings.Contains(out, "PodDisruptionBudget") {
		t.Fatal("kubectl get events as the namespace's user does not show the PodDisruptionBudget's")
	}
	if !strings.Contains(out, "Deployment") {
		t.Fatal("kubectl get events as the namespace's user does not show the Deployment's")
	}
	for _, object := range []string{"deployment/web", "poddisruptionbudget/web"} {
		if out := kubectl("describe", "-n", ns, object); !strings.Contains(out, nodedecide.ReasonBudgetBlocksDrain) {
			t.Errorf("kubectl describe %s as the namespace's user shows no %s Event:\n%s", object, nodedecide.ReasonBudgetBlocksDrain, out)
		}
	}
	if _, err := owner.CoreV1().Nodes().Get(t.Context(), drained, metav1.GetOptions{}); err == nil {
		t.Fatal("the namespace's user reads nodes: the test proves nothing about where app owners look")
	}

	// The drain goes on looking at the node (its evictions refused and tried again); still one
	// Event per object.
	looks := func(m framework.Metrics) float64 {
		v, _ := m.Value("controller_runtime_reconcile_total", map[string]string{"controller": "node"})
		return v
	}
	m, err := framework.ScrapeMetrics(t.Context(), controller.MetricsTarget())
	if err != nil {
		t.Fatal(err)
	}
	before := looks(m)
	expectMetrics(t, controller.MetricsTarget(), "the node looked at again", func(m framework.Metrics) []string {
		if n := looks(m); n < before+3 {
			return []string{fmt.Sprintf("%v looks at nodes, want %v", n, before+3)}
		}
		return nil
	})
	after, err := appOwnerEvents(t.Context(), owner, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 {
		t.Fatalf("Events for the app's owners after more looks:\n%s\nwant 2", strings.Join(notes(after), "\n"))
	}
}

// appOwnerEvents lists, as the user, the namespace's Events of nodemaint's reasons for
// application owners.
func appOwnerEvents(ctx context.Context, user kubernetes.Interface, ns string) ([]eventsv1.Event, error) {
	list, err := user.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Reason == nodedecide.ReasonBudgetBlocksDrain || ev.Reason == nodedecide.ReasonEvacuationUnanswered {
			out = append(out, ev)
		}
	}
	return out, nil
}

func regards(evs []eventsv1.Event, kind, name string) *eventsv1.Event {
	for i, ev := range evs {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name {
			return &evs[i]
		}
	}
	return nil
}

func notes(evs []eventsv1.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s/%s: %s", ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Note))
	}
	return out
}
