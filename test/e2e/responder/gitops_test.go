package responder_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// TestGitOpsRevertsSurge: a stand-in for a self-healing GitOps engine (Argo CD's selfHeal,
// Flux's kustomize-controller) server-side applies the manifest of a Deployment of 2 replicas
// (budget minAvailable 1), replicas included, at every change of the Deployment: it sets each
// surge back to 2 within a moment. Both pods' nodes are maintained. The responder surges at
// most once more after the first revert, then says in an Event and, through its pods' decline,
// in the maintenance's status that something reverts the Deployment's replicas, and the pods
// move through their budget (evicted; one waits for the other's replacement), Ready never
// below 1. Without the fix, it surged again at every look and the drain never ended.
func TestGitOpsRevertsSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	manifest := gitopsDeployment(ns)
	framework.CreateDeployment(t, manifest.DeepCopy())
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	standIn := startGitOpsStandIn(t, manifest, true)
	var nodes []string
	for _, pod := range s.view().live() {
		nodes = append(nodes, pod.Spec.NodeName)
	}

	nm := maintain(t, ns, nodes...)
	status := watchBlocked(t, nm.Name)
	testutil.Eventually(t, waitTimeout, "the maintenance Drained", func(ctx context.Context) (bool, string, error) {
		cur := &nodemaintv1alpha1.NodeMaintenance{}
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), cur)
		return err == nil && meta.IsStatusConditionTrue(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrained), "", err
	})
	s.waitFor(t, waitTimeout, "the Deployment settled at its 2 replicas off the maintained nodes", func(v view) bool {
		return v.settled(2) && len(v.liveOn(nodes...)) == 0
	})

	surges, reverted := countEvents(t, ns, "web", "SurgeStarted"), countEvents(t, ns, "web", "ReplicasReverted")
	minReady, _, maxReplicas := s.stats()
	t.Logf("%d surges, %d ReplicasReverted Events, %d ScaledDuringSurge; the stand-in set replicas back %d times; Ready never below %d, replicas at most %d",
		surges, reverted, countEvents(t, ns, "web", "ScaledDuringSurge"), standIn.reverts.Load(), minReady, maxReplicas)
	if standIn.reverts.Load() == 0 {
		t.Fatal("the stand-in never set the replicas back: the test proves nothing")
	}
	if surges > 2 {
		t.Errorf("%d surges, want at most 2: the first, and once more after the first revert", surges)
	}
	if reverted == 0 {
		t.Error("no ReplicasReverted Event on the Deployment")
	}
	if !s.declinedWith(surgepolicy.ReasonReplicasReverted) {
		t.Errorf("no pod declined with %s", surgepolicy.ReasonReplicasReverted)
	}
	if msg, ok := status.saw("reverts its replicas"); !ok {
		t.Errorf("the maintenance's status never said that something reverts the replicas; blocked messages seen: %v", status.messages())
	} else {
		t.Logf("the status said: %s", msg)
	}
	if minReady < 1 {
		t.Errorf("Ready pods went down to %d, want at least 1 (the budget) throughout", minReady)
	}
	expectMarkersGone(t, ns, "web")
}

// TestGitOpsIgnoringReplicasSurges: the stand-in configured as the user guide says (Argo CD's
// ignoreDifferences of /spec/replicas with RespectIgnoreDifferences, Flux with replicas left out
// of the manifest) server-side applies everything of the Deployment's manifest but its replicas,
// at every change of the Deployment, during the surge too: the surge completes, with no revert,
// and Ready never goes below the Deployment's 2 replicas.
func TestGitOpsIgnoringReplicasSurges(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	manifest := gitopsDeployment(ns)
	framework.CreateDeployment(t, manifest.DeepCopy())
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	standIn := startGitOpsStandIn(t, manifest, false)
	old := s.view().live()[0]

	maintain(t, ns, old.Spec.NodeName)
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(2) && v.pod(old.Name) == nil && len(v.liveOn(old.Spec.NodeName)) == 0
	})
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("the stand-in applied %d times during the surge; Ready never below %d, at most %d pods, replicas at most %d",
		standIn.duringSurge.Load(), minReady, maxLive, maxReplicas)
	if standIn.duringSurge.Load() == 0 {
		t.Fatal("the stand-in never applied the manifest during the surge: the test proves nothing")
	}
	if minReady < 2 {
		t.Errorf("Ready pods down to %d, want at least 2 throughout", minReady)
	}
	if maxReplicas != 3 {
		t.Errorf("spec.replicas up to %d, want a surge to 3", maxReplicas)
	}
	for _, reason := range []string{"ScaledDuringSurge", "ReplicasReverted"} {
		if n := countEvents(t, ns, "web", reason); n > 0 {
			t.Errorf("%d %s Events, want none", n, reason)
		}
	}
	if s.declinedWith(surgepolicy.ReasonReplicasReverted) {
		t.Errorf("a pod declined with %s", surgepolicy.ReasonReplicasReverted)
	}
	expectMarkersGone(t, ns, "web")
}

// gitopsDeployment is the manifest the stand-in keeps applying: the Deployment web of 2
// replicas, maxSurge 1, pods Ready 2s after they start.
func gitopsDeployment(ns string) *appsv1.Deployment {
	d := framework.NewDeployment(ns, "web", 2)
	maxSurge, maxUnavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable},
	}
	d.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "2s"}
	return d
}

// gitopsStandIn counts what the stand-in did: the applies that set spec.replicas back, and the
// applies made while a surge was in progress.
type gitopsStandIn struct {
	reverts, duringSurge atomic.Int32
}

// startGitOpsStandIn starts, until the test ends, a stand-in for a GitOps engine that corrects
// drift at once: at every event of the Deployment it server-side applies the manifest with its
// own field manager, forcing conflicts as Flux's kustomize-controller and Argo CD's server-side
// sync do. With replicas, the manifest's spec.replicas is applied too, which reverts a surge;
// without, spec.replicas is left out, as Argo CD's ignoreDifferences with
// RespectIgnoreDifferences=true and a Flux manifest without replicas do.
func startGitOpsStandIn(t *testing.T, manifest *appsv1.Deployment, replicas bool) *gitopsStandIn {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(manifest)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	if !replicas {
		unstructured.RemoveNestedField(u.Object, "spec", "replicas")
	}
	want := ptr.Deref(manifest.Spec.Replicas, 1)

	st := &gitopsStandIn{}
	var mu sync.Mutex // one apply at a time, as one engine
	apply := func(d *appsv1.Deployment) {
		mu.Lock()
		defer mu.Unlock()
		_, surging := d.Annotations[evacuation.SurgeAnnotation]
		revert := replicas && ptr.Deref(d.Spec.Replicas, 1) != want
		err := framework.Client().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner("gitops-stand-in"), client.ForceOwnership)
		switch {
		case err != nil:
			t.Logf("the GitOps stand-in's apply: %v", err)
		case revert:
			st.reverts.Add(1)
		}
		if err == nil && surging {
			st.duringSurge.Add(1)
		}
	}
	lw := toolscache.NewFilteredListWatchFromClient(framework.Cluster().Client().AppsV1().RESTClient(), "deployments", manifest.Namespace,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", manifest.Name).String()
		})
	informer := toolscache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, nil)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { apply(o.(*appsv1.Deployment)) },
		UpdateFunc: func(_, o any) { apply(o.(*appsv1.Deployment)) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go informer.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("the GitOps stand-in's watch did not sync")
	}
	return st
}

// blockedWatch records every message of the blocked entries a NodeMaintenance's status showed.
type blockedWatch struct {
	mu   sync.Mutex
	seen []string
}

// watchBlocked watches the NodeMaintenance until the test ends.
func watchBlocked(t *testing.T, name string) *blockedWatch {
	t.Helper()
	dc, err := dynamic.NewForConfig(framework.Cluster().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, err := dc.Resource(nodemaintv1alpha1.GroupVersion.WithResource("nodemaintenances")).Watch(t.Context(),
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	b := &blockedWatch{}
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			u, ok := e.Object.(*unstructured.Unstructured)
			nm := &nodemaintv1alpha1.NodeMaintenance{}
			if !ok || e.Type == watch.Error || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, nm) != nil {
				continue
			}
			b.mu.Lock()
			for _, node := range nm.Status.Nodes {
				for _, entry := range node.Blocked {
					b.seen = append(b.seen, entry.Reason+": "+entry.Message)
				}
			}
			b.mu.Unlock()
		}
	}()
	return b
}

// saw returns the first message seen that contains s.
func (b *blockedWatch) saw(s string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.seen {
		if strings.Contains(m, s) {
			return m, true
		}
	}
	return "", false
}

func (b *blockedWatch) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.seen {
		if len(out) == 0 || out[len(out)-1] != m {
			out = append(out, m)
		}
	}
	return out
}
