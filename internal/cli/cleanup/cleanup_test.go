package cleanup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// TestRestoreNode: what nodemaint changed goes, what someone else did stays.
func TestRestoreNode(t *testing.T) {
	planned := corev1.Taint{Key: nodemaintv1alpha1.PlannedMaintenanceTaint, Effect: corev1.TaintEffectPreferNoSchedule}
	oos := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	node := func(unschedulable bool, annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: annotations}, Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
	}
	for name, tc := range map[string]struct {
		in                *corev1.Node
		wantUnschedulable bool
		wantTaints        int
		wantAnnotations   int
	}{
		"cordoned by nodemaint": {in: node(true, map[string]string{nodemaintv1alpha1.CordonedAnnotation: "true", nodemaintv1alpha1.MaintenancesAnnotation: "a=Drain", "keep": "x"}, other),
			wantTaints: 1, wantAnnotations: 1},
		"cordoned before": {in: node(true, map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: "a=Drain"}),
			wantUnschedulable: true},
		"turn completed":                      {in: node(false, map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: "pool=Released", nodemaintv1alpha1.CompleteAnnotation: "pool"})},
		"planned taint":                       {in: node(false, map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: "a=Planning"}, planned, other), wantTaints: 1},
		"our out-of-service taint":            {in: node(true, map[string]string{nodemaintv1alpha1.CordonedAnnotation: "true", nodemaintv1alpha1.OutOfServiceAnnotation: "true"}, oos)},
		"someone else's out-of-service taint": {in: node(false, nil, oos), wantTaints: 1},
		"autoscalers held": {in: node(true, map[string]string{nodemaintv1alpha1.CordonedAnnotation: "true",
			nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: "true", nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation: "false",
			nodemaintv1alpha1.AutoscalersHeldAnnotation: nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation + "," + nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation}),
			wantAnnotations: 1},
		"another writer's autoscaler annotation": {in: node(false, map[string]string{nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: "true"}),
			wantAnnotations: 1},
		"drain started": {in: node(true, map[string]string{nodemaintv1alpha1.CordonedAnnotation: "true", nodemaintv1alpha1.MaintenancesAnnotation: "a=Drain",
			nodemaintv1alpha1.DrainStartedAnnotation: `{"a":{"start":"2026-01-01T12:00:00Z","generation":1}}`})},
	} {
		t.Run(name, func(t *testing.T) {
			changes := restoreNode(tc.in)
			if tc.in.Spec.Unschedulable != tc.wantUnschedulable {
				t.Errorf("unschedulable %v, want %v; changes %v", tc.in.Spec.Unschedulable, tc.wantUnschedulable, changes)
			}
			if len(tc.in.Spec.Taints) != tc.wantTaints {
				t.Errorf("taints %v, want %d; changes %v", tc.in.Spec.Taints, tc.wantTaints, changes)
			}
			if len(tc.in.Annotations) != tc.wantAnnotations {
				t.Errorf("annotations %v, want %d; changes %v", tc.in.Annotations, tc.wantAnnotations, changes)
			}
			if again := restoreNode(tc.in); len(again) != 0 {
				t.Errorf("not idempotent: %v", again)
			}
		})
	}
}

// TestRemoveNodeConditions: cleanup removes UnderMaintenance and the KEP-5683 conditions of
// reason NodeMaintenance; another tool's lifecycle condition and the kubelet's stay.
func TestRemoveNodeConditions(t *testing.T) {
	ours := func(ty corev1.NodeConditionType) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ty, Status: corev1.ConditionTrue, Reason: nodemaintv1alpha1.NodeConditionReasonNodeMaintenance}
	}
	node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		{Type: nodemaintv1alpha1.NodeConditionUnderMaintenance, Status: corev1.ConditionTrue, Reason: "Drain"},
		ours(corev1.NodeMaintenanceInProgress),
		ours(corev1.NodeDrained),
		{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: "ClusterAutoscaler"},
	}}}
	removed := removeNodeConditions(node)
	if fmt.Sprint(removed) != "[UnderMaintenance MaintenanceInProgress Drained]" {
		t.Errorf("removed %v", removed)
	}
	if len(node.Status.Conditions) != 2 {
		t.Errorf("kept %+v, want Ready and the autoscaler's MaintenancePlanned", node.Status.Conditions)
	} else {
		if got := node.Status.Conditions[0].Type; got != corev1.NodeReady {
			t.Errorf("first kept condition %s, want %s", got, corev1.NodeReady)
		}
		if got := node.Status.Conditions[1].Reason; got != "ClusterAutoscaler" {
			t.Errorf("second kept condition's reason %q, want the autoscaler's (ClusterAutoscaler)", got)
		}
	}
	if again := removeNodeConditions(node); len(again) != 0 {
		t.Errorf("not idempotent: %v", again)
	}
}

func TestLeaseHeld(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}}}
	}
	for name, tc := range map[string]struct {
		lease *coordinationv1.Lease
		want  bool
	}{
		"renewed just now": {lease("pod-a", time.Second), true},
		"expired":          {lease("pod-a", 20*time.Second), false},
		"released":         {lease("", time.Second), false},
		"never renewed":    {&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a")}}, false},
	} {
		if _, got := leaseHeld(tc.lease, now); got != tc.want {
			t.Errorf("%s: held %v, want %v", name, got, tc.want)
		}
	}
}

// TestCleanupPodsAndMaintenances: nodemaint's requests go, another requester's stays; the
// finalizers go; dry run changes nothing; a second run finds nothing.
func TestCleanupPodsAndMaintenances(t *testing.T) {
	ours := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ours"}}
	evacuation.SetCondition(ours, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance})
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs"}}
	evacuation.SetCondition(theirs, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "Descheduler"})
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Finalizers: []string{nodemaintv1alpha1.Finalizer}}}
	request := func(name, by string) *lifecyclev1alpha1.EvictionRequest {
		return &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{requester.NodeLabel: "n1"}},
			Spec:       lifecyclev1alpha1.EvictionRequestSpec{Requester: by, Intent: lifecyclev1alpha1.EvictionRequestIntentEviction},
		}
	}
	ourER, theirER := request("nodemaint-1", ernames.Requester), request("descheduler-1", "descheduler.example.com/x")
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(ours, theirs, nm, ourER, theirER).WithStatusSubresource(&corev1.Pod{}).Build()
	ctx := context.Background()

	var out bytes.Buffer
	if err := (&cleaner{c: c, out: &out, dryRun: true}).run(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evictionrequest/ns/nodemaint-1: deleted", "pod/ns/ours: removed EvacuationRequest", "(dry run)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run says:\n%s\nwant %q", out.String(), want)
		}
	}
	for _, notOurs := range []string{"descheduler-1", "theirs"} {
		if strings.Contains(out.String(), notOurs) {
			t.Errorf("dry run says:\n%s\nwant nothing of %q", out.String(), notOurs)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ours), ours); err != nil || !ourRequest(ours) {
		t.Errorf("dry run removed the request (%v)", err)
	}

	out.Reset()
	if err := (&cleaner{c: c, out: &out}).run(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup:\n%s", out.String())
	if err := c.Get(ctx, client.ObjectKeyFromObject(ours), ours); err != nil || evacuation.Condition(ours, evacuation.Request) != nil {
		t.Errorf("our request left: %v (%v)", ours.Status.Conditions, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ourER), ourER); !apierrors.IsNotFound(err) {
		t.Errorf("nodemaint's EvictionRequest left (%v)", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirER), theirER); err != nil {
		t.Errorf("another requester's EvictionRequest is gone: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil || !evacuation.RequestedBy(theirs, "Descheduler") {
		t.Errorf("the descheduler's request is gone: %v (%v)", theirs.Status.Conditions, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil || len(nm.Finalizers) != 0 {
		t.Errorf("NodeMaintenance finalizers %v (%v)", nm.Finalizers, err)
	}

	out.Reset()
	if err := (&cleaner{c: c, out: &out}).run(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if out.String() != "Nothing of nodemaint's left to clean up.\n" {
		t.Errorf("second run:\n%s", out.String())
	}
}

// leaseClock is the checks' clock: a second passes at each read of the Leases. With renew, each
// read first renews every Lease still held, as its running controller does.
type leaseClock struct {
	now   time.Time
	renew bool
	reads int
}

func (l *leaseClock) Now() time.Time { return l.now }

func (l *leaseClock) read(ctx context.Context, c client.WithWatch) {
	l.reads++
	was := l.now
	l.now = l.now.Add(time.Second)
	if !l.renew {
		return
	}
	var leases coordinationv1.LeaseList
	_ = c.List(ctx, &leases)
	for i := range leases.Items {
		if _, held := leaseHeld(&leases.Items[i], was); !held {
			continue
		}
		leases.Items[i].Spec.RenewTime = &metav1.MicroTime{Time: l.now}
		_ = c.Update(ctx, &leases.Items[i])
	}
}

func (l *leaseClock) interceptor(listErr error) interceptor.Funcs {
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*coordinationv1.LeaseList); ok {
				l.read(ctx, c)
				if listErr != nil {
					return listErr
				}
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok {
				l.read(ctx, c)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}
}

// TestCheckNoLeaderAnyNamespace: a controller holding its Lease in any namespace (a Helm release's,
// not only nodemaint-system), renewing it, stops cleanup; an expired Lease, or one of another
// name, does not.
func TestCheckNoLeaderAnyNamespace(t *testing.T) {
	start := time.Now()
	lease := func(ns, name string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: start.Add(-renewedAgo)}}}
	}
	for name, tc := range map[string]struct {
		leases []client.Object
		refuse bool
	}{
		"held in the Helm release's namespace": {[]client.Object{lease("platform", leaderLease, time.Second)}, true},
		"held in nodemaint-system":             {[]client.Object{lease("nodemaint-system", leaderLease, time.Second)}, true},
		"expired":                              {[]client.Object{lease("platform", leaderLease, time.Minute)}, false},
		"another controller's Lease":           {[]client.Object{lease("platform", "other.example.com", time.Second)}, false},
		"none":                                 {nil, false},
	} {
		clock := &leaseClock{now: start, renew: true}
		c := fake.NewClientBuilder().WithObjects(tc.leases...).WithInterceptorFuncs(clock.interceptor(nil)).
			WithIndex(&coordinationv1.Lease{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
		err := checkNoLeader(context.Background(), c, "nodemaint-system", io.Discard, clock.Now, time.Millisecond)
		if (err != nil) != tc.refuse {
			t.Errorf("%s: %v, want refused %v", name, err, tc.refuse)
		}
	}
	// A user who may not list Leases everywhere: the Lease in --controller-namespace is read.
	forbidden := apierrors.NewForbidden(coordinationv1.Resource("leases"), "", fmt.Errorf("no"))
	for ns, refuse := range map[string]bool{"nodemaint-system": true, "elsewhere": false} {
		clock := &leaseClock{now: start, renew: true}
		c := fake.NewClientBuilder().WithObjects(lease("nodemaint-system", leaderLease, time.Second)).WithInterceptorFuncs(clock.interceptor(forbidden)).Build()
		if err := checkNoLeader(context.Background(), c, ns, io.Discard, clock.Now, time.Millisecond); (err != nil) != refuse {
			t.Errorf("forbidden to list, --controller-namespace %s: %v, want refused %v", ns, err, refuse)
		}
	}
}

// TestCheckNoLeaderStoppedController: a Lease its controller left held when it stopped (helm
// uninstall removed its RBAC with its pods: its release was refused) does not stop cleanup, which
// waits until it expires, and no longer; one whose holder changes meanwhile does.
func TestCheckNoLeaderStoppedController(t *testing.T) {
	start := time.Now()
	left := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "nodemaint-system", Name: leaderLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: start.Add(-time.Second)}}}
	clock := &leaseClock{now: start}
	c := fake.NewClientBuilder().WithObjects(left.DeepCopy()).WithInterceptorFuncs(clock.interceptor(nil)).
		WithIndex(&coordinationv1.Lease{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
	var errOut bytes.Buffer
	if err := checkNoLeader(context.Background(), c, "nodemaint-system", &errOut, clock.Now, time.Millisecond); err != nil {
		t.Fatalf("a Lease left held by a stopped controller stops cleanup: %v", err)
	}
	// Renewed 1s before the checks' clock starts, 15s long: expired at the 14th read.
	if clock.reads != 14 {
		t.Errorf("read the Lease %d times (a second each), want until it expired: 14", clock.reads)
	}
	if !strings.Contains(errOut.String(), "held by pod-a") {
		t.Errorf("cleanup says nothing of the wait: %q", errOut.String())
	}

	// Another replica takes it over meanwhile: a controller runs.
	clock = &leaseClock{now: start}
	c = fake.NewClientBuilder().WithObjects(left.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			clock.read(ctx, cl)
			if clock.reads == 3 {
				var l coordinationv1.Lease
				if err := cl.Get(ctx, client.ObjectKeyFromObject(left), &l); err != nil {
					return err
				}
				l.Spec.HolderIdentity = ptr.To("pod-b")
				l.Spec.RenewTime = &metav1.MicroTime{Time: clock.now}
				if err := cl.Update(ctx, &l); err != nil {
					return err
				}
			}
			return cl.List(ctx, list, opts...)
		},
	}).WithIndex(&coordinationv1.Lease{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
	if err := checkNoLeader(context.Background(), c, "nodemaint-system", io.Discard, clock.Now, time.Millisecond); err == nil || !strings.Contains(err.Error(), "pod-b") {
		t.Errorf("the Lease taken over by pod-b while cleanup waited: %v, want refused naming pod-b", err)
	}
}

// TestCheckNoDeployment: a nodemaint-controller Deployment with available replicas in any
// namespace stops cleanup, with or without leader election (a controller without it holds no
// Lease); one scaled to 0, or another app's, does not.
func TestCheckNoDeployment(t *testing.T) {
	deployment := func(ns, name string, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": name}},
			Status:     appsv1.DeploymentStatus{AvailableReplicas: available},
		}
	}
	for name, tc := range map[string]struct {
		objs   []client.Object
		refuse bool
	}{
		"running in the Helm release's namespace": {[]client.Object{deployment("platform", "nodemaint-controller", 1)}, true},
		"scaled to 0": {[]client.Object{deployment("nodemaint-system", "nodemaint-controller", 0)}, false},
		"another app": {[]client.Object{deployment("platform", "web", 3)}, false},
		"none":        {nil, false},
	} {
		c := fake.NewClientBuilder().WithObjects(tc.objs...).Build()
		if err := checkNoDeployment(context.Background(), c, "nodemaint-system"); (err != nil) != tc.refuse {
			t.Errorf("%s: %v, want refused %v", name, err, tc.refuse)
		}
	}
	// A user who may not list Deployments everywhere: those of --controller-namespace are listed.
	forbidden := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		if o.Namespace == "" {
			return apierrors.NewForbidden(appsv1.Resource("deployments"), "", fmt.Errorf("no"))
		}
		return c.List(ctx, list, opts...)
	}}
	c := fake.NewClientBuilder().WithObjects(deployment("nodemaint-system", "nodemaint-controller", 1)).WithInterceptorFuncs(forbidden).Build()
	if err := checkNoDeployment(context.Background(), c, "nodemaint-system"); err == nil {
		t.Error("forbidden to list everywhere: the Deployment running in --controller-namespace does not stop cleanup")
	}
	if err := checkNoDeployment(context.Background(), c, "elsewhere"); err != nil {
		t.Errorf("forbidden to list everywhere, none in --controller-namespace: %v", err)
	}
}

// TestMachinesHooksRemoved: cleanup removes nodemaint's pre-drain hook from every Cluster API
// Machine, another hook stays; a cluster without Machines is no error.
func TestMachinesHooksRemoved(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const otherHook = "pre-drain.delete.hook.machine.cluster.x-k8s.io/other"
	hooked := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "md-0-a",
		Annotations: map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: "nodemaint", otherHook: "other"}}}
	other := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "md-0-b", Annotations: map[string]string{otherHook: "other"}}}
	// The API server's mapper gives the preferred version of a kind named without one.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{clusterv1.GroupVersion})
	mapper.Add(clusterv1.GroupVersion.WithKind("Machine"), meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(hooked, other).Build()
	var out bytes.Buffer
	cl := &cleaner{c: c, out: &out}
	if err := cl.machines(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*clusterv1.Machine{hooked, other} {
		got := &clusterv1.Machine{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]; ok {
			t.Errorf("Machine %s: annotations %v; want no %s", m.Name, got.Annotations, nodemaintv1alpha1.ClusterAPIPreDrainHook)
		}
		if got.Annotations[otherHook] != "other" {
			t.Errorf("Machine %s: %s = %q; want the other hook kept (other)", m.Name, otherHook, got.Annotations[otherHook])
		}
	}
	if want := "machine.cluster.x-k8s.io/capi/md-0-a: removed annotation " + nodemaintv1alpha1.ClusterAPIPreDrainHook; !strings.Contains(out.String(), want) {
		t.Errorf("output %q; want %q", out.String(), want)
	}
	if cl.changes != 1 {
		t.Errorf("%d changes; want 1", cl.changes)
	}

	// Without Cluster API: nothing, and no error.
	cl = &cleaner{c: fake.NewClientBuilder().WithScheme(clioptions.Scheme).Build(), out: &out}
	if err := cl.machines(t.Context()); err != nil || cl.changes != 0 {
		t.Errorf("without Machines: %v, %d changes", err, cl.changes)
	}
}
