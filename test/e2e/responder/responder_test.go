package responder_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// waitTimeout bounds the waits for an evacuation: a few waves of pods that take seconds to start.
const waitTimeout = 90 * time.Second

// TestSingleReplicaWithStrictPDB: a single-replica Deployment whose PDB allows no disruption
// (kubectl drain would wait forever) moves off the maintained node with a Ready pod at every
// moment, although its pods take 5s to start.
func TestSingleReplicaWithStrictPDB(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	s := moveStrictSingleReplica(t, ns, intstr.FromString("25%"), "5s")
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("Ready pods never below %d, at most %d pods, spec.replicas at most %d", minReady, maxLive, maxReplicas)
	if minReady < 1 {
		t.Errorf("Ready pods down to %d, want at least 1 throughout", minReady)
	}
	if maxLive > 2 {
		t.Errorf("%d pods at once, want at most 2", maxLive)
	}
	if maxReplicas > 2 {
		t.Errorf("spec.replicas up to %d, want at most 2", maxReplicas)
	}
	expectMarkersGone(t, ns, "web")
}

// TestWavesOfMaxSurge: 10 replicas with maxSurge 2, spread over the maintained nodes and
// others: only the maintained nodes' pods move, in waves of at most 2, and 10 stay Ready.
func TestWavesOfMaxSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	createDeployment(t, ns, "web", 10, intstr.FromInt32(2), "3s", 0)
	s := watchApp(t, ns, "web")

	// Maintain the two nodes with the most pods: at least 3 pods, so more than one wave.
	byNode := map[string][]string{}
	for _, pod := range s.view().live() {
		byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod.Name)
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return len(byNode[nodes[i]]) > len(byNode[nodes[j]]) })
	maintained, others := nodes[:2], nodes[2:]
	var staying []string
	for _, n := range others {
		staying = append(staying, byNode[n]...)
	}
	moving := len(byNode[maintained[0]]) + len(byNode[maintained[1]])
	if moving < 3 {
		t.Fatalf("pods not spread as needed: %d on the two nodes maintained, want at least 3: %v", moving, byNode)
	}
	if len(staying) == 0 {
		t.Fatalf("pods not spread as needed: none on the other nodes, want some staying: %v", byNode)
	}
	t.Logf("maintaining %v with %d pods; %d pods on %v stay", maintained, moving, len(staying), others)

	maintain(t, ns, maintained...)
	s.waitFor(t, waitTimeout, "the maintained nodes' pods replaced", func(v view) bool {
		return v.settled(10) && len(v.liveOn(maintained...)) == 0
	})
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("Ready pods never below %d, at most %d pods, spec.replicas at most %d", minReady, maxLive, maxReplicas)
	if minReady < 10 {
		t.Errorf("Ready pods down to %d, want at least 10 throughout", minReady)
	}
	if maxLive > 12 {
		t.Errorf("%d pods at once, want at most 12", maxLive)
	}
	if maxReplicas > 12 {
		t.Errorf("spec.replicas up to %d, want at most 12", maxReplicas)
	}
	if moved := s.wentAway(staying); len(moved) > 0 {
		t.Errorf("pods of nodes not under maintenance were removed: %v", moved)
	}
	waves := countEvents(t, ns, "web", "SurgeStarted")
	t.Logf("%d pods moved in %d waves", moving, waves)
	if want := (moving + 1) / 2; waves < want {
		t.Errorf("%d waves for %d pods with maxSurge 2, want at least %d", waves, moving, want)
	}
	expectMarkersGone(t, ns, "web")
}

// TestWithdrawalRollsBackSurge: the maintenance is deleted while the surge pod is Ready but not
// yet available (minReadySeconds): the surge pod goes, the evacuated pod stays, and the
// Deployment is back to its replicas with no trace of the evacuation.
func TestWithdrawalRollsBackSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	createDeployment(t, ns, "web", 2, intstr.FromInt32(1), "1s", 10)
	s := watchApp(t, ns, "web")
	node := s.view().live()[0].Spec.NodeName
	evacuated := names(s.view().liveOn(node))

	nm := maintain(t, ns, node)
	s.waitFor(t, waitTimeout, "the surge pod Ready", func(v view) bool {
		return v.replicas() == 2+1 && v.surging() && len(v.ready()) == 3
	})
	// The markers of KEP-4212, while the evacuation is under way.
	var rss appsv1.ReplicaSetList
	if err := framework.Client().List(t.Context(), &rss, client.InNamespace(ns)); err != nil || len(rss.Items) != 1 {
		t.Fatalf("want 1 ReplicaSet: %v %v", rss.Items, err)
	}
	rs := rss.Items[0].Annotations
	if rs[evacuation.EvacuationReadyAnnotation] != "true" {
		t.Errorf("ReplicaSet annotations %v, want %s=true", nodemaintAnnotations(rs), evacuation.EvacuationReadyAnnotation)
	}
	if rs[evacuation.ReplicasToEvacuateAnnotation] != fmt.Sprint(len(evacuated)) {
		t.Errorf("ReplicaSet annotations %v, want %s=%d", nodemaintAnnotations(rs), evacuation.ReplicasToEvacuateAnnotation, len(evacuated))
	}
	if got := s.view().d.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation]; got != fmt.Sprint(len(evacuated)) {
		t.Errorf("Deployment %s=%q, want %d", evacuation.DeploymentReplicasToEvacuateAnnotation, got, len(evacuated))
	}

	if err := framework.Client().Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, waitTimeout, "the surge rolled back", func(v view) bool {
		if !v.settled(2) || v.d.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation] != "" {
			return false
		}
		for _, pod := range v.live() {
			if evacuation.Condition(pod, evacuation.Initiated) != nil || len(nodemaintAnnotations(pod.Annotations)) > 0 {
				return false
			}
		}
		return true
	})
	for _, name := range evacuated {
		if s.view().pod(name) == nil {
			t.Errorf("evacuated pod %s is gone", name)
		}
	}
	if removed := s.wentAway(evacuated); len(removed) > 0 {
		t.Errorf("evacuated pods removed although the evacuation was withdrawn: %v", removed)
	}
	minReady, _, maxReplicas := s.stats()
	if minReady < 2 {
		t.Errorf("Ready pods down to %d, want at least 2 throughout", minReady)
	}
	if maxReplicas > 3 {
		t.Errorf("spec.replicas up to %d, want at most 3", maxReplicas)
	}
	expectMarkersGone(t, ns, "web")
}

// TestScaledDuringSurge: the user scales the Deployment while a surge is in flight: their count
// wins, and the evacuation goes on from it.
func TestScaledDuringSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	createDeployment(t, ns, "web", 2, intstr.FromInt32(1), "5s", 0)
	s := watchApp(t, ns, "web")
	node := s.view().live()[0].Spec.NodeName

	maintain(t, ns, node)
	s.waitFor(t, waitTimeout, "a surge in flight", func(v view) bool { return v.surging() && v.replicas() == 3 })
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := framework.Client().SubResource("scale").Update(t.Context(), d, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, waitTimeout, "the evacuation completed at the user's count", func(v view) bool {
		return v.settled(5) && len(v.liveOn(node)) == 0
	})
	if n := countEvents(t, ns, "web", "ScaledDuringSurge"); n == 0 {
		t.Error("no ScaledDuringSurge Event")
	}
	expectMarkersGone(t, ns, "web")
}

// TestDeclined: the pods of Deployments that do not surge (maxSurge 0, paused, scaled by two
// HorizontalPodAutoscalers) are declined at once, so the drain need not wait for the response
// timeout.
func TestDeclined(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	createDeployment(t, ns, "nosurge", 1, intstr.FromInt32(0), "1s", 0)
	nosurge := watchApp(t, ns, "nosurge")
	// A Deployment created paused has no ReplicaSet yet: pause it once it is available.
	framework.CreateDeployment(t, framework.NewDeployment(ns, "paused", 1))
	pause := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))
	if err := framework.Client().Patch(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"}}, pause); err != nil {
		t.Fatal(err)
	}
	paused := watchApp(t, ns, "paused")
	// Two HPAs target the Deployment (one is no obstacle: TestAutoscaledDeploymentSurges).
	createDeployment(t, ns, "autoscaled", 1, intstr.FromInt32(1), "1s", 0)
	for _, name := range []string{"autoscaled", "autoscaled-too"} {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "autoscaled"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 1,
			},
		}
		if err := framework.Client().Create(t.Context(), hpa); err != nil {
			t.Fatal(err)
		}
	}
	autoscaled := watchApp(t, ns, "autoscaled")
	var nodes []string
	for _, s := range []*sampler{nosurge, paused, autoscaled} {
		nodes = append(nodes, s.view().live()[0].Spec.NodeName)
	}

	// On the EvictionRequest API the answers are on the pods' Evictions: a decline completes the
	// Deployment responder's turn with the reason, and the imperative evictor moves the pod.
	var evictions *evictionWatch
	if os.Getenv("EVICTION_REQUEST_API") == "true" {
		evictions = watchEvictions(t, ns)
	}
	maintain(t, ns, nodes...)
	for s, reason := range map[*sampler]string{nosurge: "MaxSurgeZero", paused: "DeploymentPaused", autoscaled: "HorizontalPodAutoscaler"} {
		pod := s.view().live()[0].Name
		s.waitFor(t, waitTimeout, "declined with "+reason, func(view) bool {
			return s.declinedWith(reason) || (evictions != nil && evictions.declinedWith(pod, reason))
		})
		v := s.view()
		if v.replicas() != 1 {
			t.Errorf("%s: declined, yet the Deployment's replicas changed: %s", reason, v)
		}
		if v.surging() {
			t.Errorf("%s: declined, yet the Deployment surges: %s", reason, v)
		}
	}
}

// TestNoCapacityGivesUp: every other node is cordoned, so the surge pod cannot be scheduled:
// the responder gives up within its bound, declines the evacuation and restores the replicas. On
// a cluster serving the EvictionRequest API the decline is the Deployment responder's turn on the
// pod's Eviction completed with the reason; otherwise the pod's EvacuationInitiated condition.
func TestNoCapacityGivesUp(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	const bound = 8 * time.Second
	startNodemaint(t, bound)
	ns := framework.Namespace(t)
	answers := watchAnswers(t, ns)
	createDeployment(t, ns, "web", 1, intstr.FromInt32(1), "1s", 0)
	s := watchApp(t, ns, "web")
	pod := s.view().live()[0]
	cordonAllBut(t, pod.Spec.NodeName)

	maintain(t, ns, pod.Spec.NodeName)
	// Once declined, the drain may evict the pod: the decline is taken from the watches' record.
	s.waitFor(t, waitTimeout, "the evacuation declined and the replicas restored", func(v view) bool {
		_, declined := answers.times(s, pod.Name, surgepolicy.ReasonSurgeTimedOut)
		return !declined.IsZero() && v.replicas() == 1 && !v.surging() && len(v.live()) == 1
	})
	accepted, declined := answers.times(s, pod.Name, surgepolicy.ReasonSurgeTimedOut)
	took := declined.Sub(accepted)
	t.Logf("gave up %v after accepting (bound %v, %s)", took.Round(10*time.Millisecond), bound, answers)
	if accepted.IsZero() || took < bound-time.Second || took > bound+10*time.Second {
		t.Errorf("gave up %v after accepting, want about %v", took, bound)
	}
	if _, _, maxReplicas := s.stats(); maxReplicas > 2 {
		t.Errorf("spec.replicas went to %d", maxReplicas)
	}
}

// answers reads the Deployment responder's answers on the protocol the cluster speaks: the
// pods' Evictions where it serves the EvictionRequest API, the pods' conditions otherwise.
type answers struct{ evictions *evictionWatch }

// watchAnswers starts watching the namespace's Evictions if the cluster serves the API, where it
// also makes sure the Deployment responder is registered on the pods created from now on.
func watchAnswers(t *testing.T, ns string) answers {
	t.Helper()
	if !framework.Cluster().EvictionRequestAPI() {
		return answers{}
	}
	framework.InstallEvictionResponderPolicy(t)
	return answers{evictions: watchEvictions(t, ns)}
}

// times returns when the Deployment responder accepted the pod's evacuation and when it declined
// it with the reason (zero if it did not, yet). On Evictions: the pod's acceptance for its
// Eviction (its marks), or else its first heartbeat, and its completionTime with the reason in
// its message; on conditions: EvacuationInitiated True, then False with the reason, as the
// sampler saw them.
func (a answers) times(s *sampler, pod, reason string) (accepted, declined time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.evictions != nil {
		accepted, declined = a.evictions.answerTimes(pod, deployment.EvictionResponder)
		if on, ok := s.acceptedOnPod[pod]; ok && (accepted.IsZero() || on.Before(accepted)) {
			accepted = on
		}
		if !a.evictions.declinedWith(pod, reason) {
			declined = time.Time{}
		}
		return accepted, declined
	}
	accepted = s.accepted[pod]
	if s.declineReasons[pod] == reason {
		declined = s.declined[pod]
	}
	return accepted, declined
}

func (a answers) String() string {
	if a.evictions != nil {
		return "on the pod's Eviction"
	}
	return "on the pod's conditions"
}

// TestSlowStartKeepsSurge: the surge pod is placed at once but takes three times the
// responder's bound to start, as after a slow image pull. Its kubelet is at work, so the
// responder waits (up to the Deployment's progressDeadlineSeconds) instead of giving up and
// leaving the pod to an eviction that its budget (minAvailable 1) would refuse.
func TestSlowStartKeepsSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	const bound = 5 * time.Second
	startNodemaint(t, bound)
	ns := framework.Namespace(t)
	s := moveStrictSingleReplica(t, ns, intstr.FromInt32(1), (3 * bound).String())
	if s.declinedWith("SurgeTimedOut") {
		t.Errorf("the responder gave up on a surge pod that was starting on its node")
	}
	if n := countEvents(t, ns, "web", "SurgeRolledBack"); n > 0 {
		t.Errorf("%d SurgeRolledBack Events, want none", n)
	}
	if minReady, _, _ := s.stats(); minReady < 1 {
		t.Errorf("Ready pods went down to %d, want 1 throughout", minReady)
	}
	expectMarkersGone(t, ns, "web")
}

// TestControllerKilledDuringSurge: nodemaint-controller is killed while a surge is in flight and
// started again after the surge became Ready: the evacuation completes, in more waves, the
// replicas are restored exactly and availability never dropped.
func TestControllerKilledDuringSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	c := startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	createDeployment(t, ns, "web", 4, intstr.FromInt32(1), "4s", 0)
	s := watchApp(t, ns, "web")
	pods := s.view().live()
	nodes := []string{pods[0].Spec.NodeName, pods[1].Spec.NodeName}
	moving := len(s.view().liveOn(nodes...))

	maintain(t, ns, nodes...)
	s.waitFor(t, waitTimeout, "a surge in flight", func(v view) bool { return v.surging() && v.replicas() == 5 })
	c.Kill()
	s.waitFor(t, waitTimeout, "the surge Ready while the controller is down", func(v view) bool {
		return len(v.ready()) == 5 && v.replicas() == 5
	})
	c.Start()
	s.waitFor(t, waitTimeout, "the evacuation completed", func(v view) bool {
		return v.settled(4) && len(v.liveOn(nodes...)) == 0
	})
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("%d pods moved; Ready pods never below %d, at most %d pods, spec.replicas at most %d", moving, minReady, maxLive, maxReplicas)
	if minReady < 4 {
		t.Errorf("Ready pods down to %d, want at least 4 throughout", minReady)
	}
	if maxLive > 5 {
		t.Errorf("%d pods at once, want at most 5", maxLive)
	}
	if maxReplicas > 5 {
		t.Errorf("spec.replicas up to %d, want at most 5", maxReplicas)
	}
	expectMarkersGone(t, ns, "web")
}

// moveStrictSingleReplica creates the Deployment web of one replica, with the given maxSurge and
// start-up time, behind a budget of minAvailable 1 (kubectl drain would wait forever), maintains
// its node and waits until its pod is replaced on another node. It returns the Deployment's
// sampler, which saw it all.
func moveStrictSingleReplica(t *testing.T, ns string, maxSurge intstr.IntOrString, readyDelay string) *sampler {
	t.Helper()
	createDeployment(t, ns, "web", 1, maxSurge, readyDelay, 0)
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	old := s.view().live()[0]

	maintain(t, ns, old.Spec.NodeName)
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(1) && v.pod(old.Name) == nil && v.live()[0].Spec.NodeName != old.Spec.NodeName
	})
	return s
}

// createDeployment creates a Deployment of pods labelled app=name that take readyDelay to
// start, with a rolling update of the given maxSurge (and maxUnavailable 0, or 1 when maxSurge
// is 0), and waits until it is available.
func createDeployment(t *testing.T, namespace, name string, replicas int32, maxSurge intstr.IntOrString, readyDelay string, minReadySeconds int32) {
	t.Helper()
	d := framework.NewDeployment(namespace, name, replicas)
	d.Spec.MinReadySeconds = minReadySeconds
	maxUnavailable := intstr.FromInt32(0)
	if maxSurge.IntValue() == 0 && maxSurge.Type == intstr.Int {
		maxUnavailable = intstr.FromInt32(1) // the API server refuses both 0
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable,
		},
	}
	d.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: readyDelay}
	framework.CreateDeployment(t, d)
}

// maintain creates a NodeMaintenance that cordons and drains the nodes. It is deleted when the
// test ends, and the test waits until it is gone, so the nodes are restored for the next test.
func maintain(t *testing.T, name string, nodes ...string) *nodemaintv1alpha1.NodeMaintenance {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: true, Drain: true, Reason: "e2e " + t.Name(),
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := framework.Client().Delete(ctx, nm); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting NodeMaintenance %s: %v", name, err)
		}
		// The test's context is done by now.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, &nodemaintv1alpha1.NodeMaintenance{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("NodeMaintenance %s not gone: %v", name, err)
		}
	})
	return nm
}

// cordonAllBut cordons every node but one until the test ends.
func cordonAllBut(t *testing.T, keep string) {
	t.Helper()
	var nodes corev1.NodeList
	if err := framework.Client().List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if node.Name == keep || node.Spec.Unschedulable {
			continue
		}
		setUnschedulable(t, node.Name, true)
		t.Cleanup(func() { setUnschedulable(t, node.Name, false) })
	}
}

func setUnschedulable(t *testing.T, node string, on bool) {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	err := framework.Client().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
	if err != nil {
		t.Errorf("cordoning node %s: %v", node, err)
	}
}

// expectMarkersGone waits until neither the Deployment nor its ReplicaSets carry any of the
// responder's annotations, and no pod carries a deletion cost.
func expectMarkersGone(t *testing.T, namespace, name string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "the responder's annotations gone", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := framework.Client().Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &d); err != nil {
			return false, "", err
		}
		if a := nodemaintAnnotations(d.Annotations); len(a) > 0 {
			return false, fmt.Sprintf("Deployment: %v", a), nil
		}
		var rss appsv1.ReplicaSetList
		if err := framework.Client().List(ctx, &rss, client.InNamespace(namespace)); err != nil {
			return false, "", err
		}
		for _, rs := range rss.Items {
			if a := nodemaintAnnotations(rs.Annotations); len(a) > 0 {
				return false, fmt.Sprintf("ReplicaSet %s: %v", rs.Name, a), nil
			}
		}
		var pods corev1.PodList
		if err := framework.Client().List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return false, "", err
		}
		for _, pod := range pods.Items {
			if a := nodemaintAnnotations(pod.Annotations); len(a) > 0 && pod.DeletionTimestamp.IsZero() {
				return false, fmt.Sprintf("pod %s: %v", pod.Name, a), nil
			}
		}
		return true, "", nil
	})
}

// countEvents counts the Events of one reason about the Deployment.
func countEvents(t *testing.T, namespace, name, reason string) int {
	t.Helper()
	var list corev1.EventList
	if err := framework.Client().List(t.Context(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == name && e.Reason == reason {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, pod := range pods {
		out = append(out, pod.Name)
	}
	return slices.Sorted(slices.Values(out))
}

// TestExampleResponder runs examples/responder, the protocol's example for responder authors,
// against a Job's worker: it accepts, checkpoints and deletes the pod, and the Job starts it on
// another node. On the EvictionRequest API (EVICTION_REQUEST_API=true) the worker names the
// example in spec.evictionResponders: it accepts on the pod's Eviction, checkpoints and completes
// its turn, and the imperative evictor evicts the pod.
func TestExampleResponder(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	runExample(t)
	evictionAPI := os.Getenv("EVICTION_REQUEST_API") == "true"
	var evictions *evictionWatch
	if evictionAPI {
		evictions = watchEvictions(t, ns)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "worker", "example.nodemaint.dev/responder": "checkpoint"},
				Annotations: map[string]string{localcluster.PodCompleteDelayAnnotation: "10m"},
			},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "work", Image: "registry.k8s.io/pause:3.10"}},
			},
		}},
	}
	if evictionAPI {
		job.Spec.Template.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: exampleResponder, Priority: ptr.To[int32](20000)}}
	}
	if err := framework.Client().Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	s := watchApp(t, ns, "worker")
	s.waitFor(t, waitTimeout, "the worker running", func(v view) bool { return len(v.ready()) == 1 })
	old := s.view().ready()[0]

	maintain(t, ns, old.Spec.NodeName)
	s.waitFor(t, waitTimeout, "the worker checkpointed and started on another node", func(v view) bool {
		ready := v.ready()
		return v.pod(old.Name) == nil && len(ready) == 1 && ready[0].Spec.NodeName != old.Spec.NodeName
	})
	if evictionAPI {
		st := evictions.last(old.Name, exampleResponder)
		if order := evictions.activeOrder(old.Name); len(order) == 0 || order[0] != exampleResponder {
			t.Errorf("on %s's Eviction, responders active in order %v; want the example first", old.Name, order)
		}
		if st.HeartbeatTime == nil {
			t.Errorf("on %s's Eviction, the example's last status %+v; want accepted (a heartbeat)", old.Name, st)
		}
		if st.CompletionTime == nil {
			t.Errorf("on %s's Eviction, the example's last status %+v; want completed", old.Name, st)
		}
		if !strings.Contains(ptr.Deref(st.Message, ""), "progress is saved") {
			t.Errorf("on %s's Eviction, the example's last message %q; want its progress saved", old.Name, ptr.Deref(st.Message, ""))
		}
		return
	}
	s.mu.Lock()
	accepted := !s.accepted[old.Name].IsZero()
	s.mu.Unlock()
	if !accepted {
		t.Error("the example responder never accepted the evacuation")
	}
}

// runExample builds and runs examples/responder as cluster admin until the test ends.
func runExample(t *testing.T) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "responder")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/nodemaint/nodemaint/examples/responder")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/responder: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(framework.Cluster().Dir(), "logs", "example-responder.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+framework.Cluster().Kubeconfig())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			t.Logf("example responder log: %s", logFile.Name())
		}
	})
}

// createStrictPDB creates a budget of minAvailable 1 over the pods labelled app=name: with one
// replica, kubectl drain would wait on it forever.
func createStrictPDB(t *testing.T, ns, name string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}
	if err := framework.Client().Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
}
