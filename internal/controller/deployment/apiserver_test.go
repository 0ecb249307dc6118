package deployment

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/decidetest"
	"github.com/nodemaint/nodemaint/internal/responder"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestScalePatchRealAPIServer: on kube-apiserver, the responder's scale patch applies over the
// Deployment controller's status reports made since the decision, and is refused once the spec
// changed since (someone scaled): the count is only ever changed from the one the decision saw.
// Its annotations are added, changed and removed, keys with a slash included.
func TestScalePatchRealAPIServer(t *testing.T) {
	c, _ := realAPIServer(t)
	ctx := context.Background()
	d := createDeployment(t, c, "web")
	seen := d.DeepCopy()
	reportStatus := func(available int32) {
		t.Helper()
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, ReadyReplicas: available, AvailableReplicas: available}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	reportStatus(2)
	reportStatus(3)

	// A wave starts from what the decision saw, two status reports ago.
	surge := (&surgepolicy.State{OriginalReplicas: 3, Surge: 1, StartTime: metav1.NowMicro()}).String()
	want := seen.DeepCopy()
	want.Spec.Replicas = ptr.To[int32](4)
	want.Annotations[evacuation.SurgeAnnotation] = surge
	want.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation] = "1"
	if err := c.Patch(ctx, want, scalePatch(seen, want)); err != nil {
		t.Fatalf("scale patch over the controller's status reports: %v", err)
	}
	if *want.Spec.Replicas != 4 {
		t.Errorf("after the patch: replicas %d; want 4", *want.Spec.Replicas)
	}
	if got := want.Annotations[evacuation.SurgeAnnotation]; got != surge {
		t.Errorf("after the patch: surge record %q; want %q", got, surge)
	}
	if got := want.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation]; got != "1" {
		t.Errorf("after the patch: replicas to evacuate %q; want 1", got)
	}
	if got := want.Annotations["example.com/owner"]; got != "team-a" {
		t.Fatalf("after the patch: example.com/owner %q; want team-a kept (annotations %v)", got, want.Annotations)
	}

	// Someone scales the Deployment; a decision taken before that is refused.
	seen = want.DeepCopy()
	scaled := want.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](6)
	if err := c.Update(ctx, scaled); err != nil {
		t.Fatal(err)
	}
	back := seen.DeepCopy()
	back.Spec.Replicas = ptr.To[int32](3)
	delete(back.Annotations, evacuation.SurgeAnnotation)
	err := c.Patch(ctx, back, scalePatch(seen, back))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("scale patch after someone scaled: %v; want it refused (422)", err)
	}
	got := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 6 {
		t.Errorf("the refused patch changed the Deployment: replicas %d; want 6", *got.Spec.Replicas)
	}
	if rec := got.Annotations[evacuation.SurgeAnnotation]; rec != surge {
		t.Fatalf("the refused patch changed the Deployment: surge %q; want %q", rec, surge)
	}

	// Decided again from the new spec: the record and the count go, the replicas stay theirs.
	seen = got.DeepCopy()
	drop := got.DeepCopy()
	delete(drop.Annotations, evacuation.SurgeAnnotation)
	delete(drop.Annotations, evacuation.DeploymentReplicasToEvacuateAnnotation)
	if err := c.Patch(ctx, drop, scalePatch(seen, drop)); err != nil {
		t.Fatal(err)
	}
	if *drop.Spec.Replicas != 6 {
		t.Errorf("after dropping the record: replicas %d; want 6", *drop.Spec.Replicas)
	}
	if len(drop.Annotations) != 1 {
		t.Errorf("after dropping the record: annotations %v; want only example.com/owner", drop.Annotations)
	}
	if got := drop.Annotations["example.com/owner"]; got != "team-a" {
		t.Errorf("after dropping the record: example.com/owner %q; want team-a", got)
	}
}

// TestAcceptedEventsOneSeries: on kube-apiserver, with the event recorder nodemaint runs, the
// acceptances of a Deployment's pods make one Event series whatever the Deployment's version
// at each (it changes with every wave), while each wave's SurgeStarted is an Event of its own.
func TestAcceptedEventsOneSeries(t *testing.T) {
	c, cfg := realAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	r := &Reconciler{Client: c, Recorder: broadcaster.NewRecorder(scheme.Scheme, "nodemaint-controller"), Clock: clock.RealClock{}}

	d := createDeployment(t, c, "api")
	accepted := deploymentdecide.Decide(deploymentdecide.Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)},
		Pods: []*corev1.Pod{pod("a", requested(0)), pod("b"), pod("c")}, Now: now, SurgeTimeout: time.Minute}).Events
	if len(accepted) != 1 {
		t.Fatalf("%d events %+v; want EvacuationAccepted alone", len(accepted), accepted)
	}
	if accepted[0].Reason != "EvacuationAccepted" {
		t.Fatalf("event %s; want EvacuationAccepted", accepted[0].Reason)
	}
	started := deploymentdecide.Event{Reason: deploymentdecide.SurgeStarted, Original: 3, Surge: 1, Asked: 1, Pods: []string{"a"}}
	for i := range 3 {
		r.record(ctx, d, append(accepted, started))
		// A wave changes the Deployment: a version of its own for the next acceptances.
		patch := client.MergeFrom(d.DeepCopy())
		d.Annotations["example.com/wave"] = strconv.Itoa(i)
		if err := c.Patch(ctx, d, patch); err != nil {
			t.Fatal(err)
		}
	}
	count := func(reason string) (objects int, occurrences int32) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Name == d.Name {
				objects++
				occurrences++
				if e.Series != nil {
					occurrences += e.Series.Count - 1
				}
			}
		}
		return objects, occurrences
	}
	// The recorder writes the second occurrence as the series (count 2) and counts the later
	// ones in memory until its next refresh.
	testutil.Eventually(t, 10*time.Second, "one series of the acceptances and an Event each wave", func(context.Context) (bool, string, error) {
		acceptedObjects, acceptedSeen := count("EvacuationAccepted")
		startedObjects, _ := count("SurgeStarted")
		return acceptedObjects == 1 && acceptedSeen >= 2 && startedObjects == 3,
			fmt.Sprintf("EvacuationAccepted: %d Events (%d occurrences written), SurgeStarted: %d Events", acceptedObjects, acceptedSeen, startedObjects), nil
	})
}

// realAPIServer starts a kube-apiserver and etcd (envtest) for the test.
func realAPIServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	cfg := testutil.APIServer(t, &envtest.Environment{})
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// createDeployment creates a Deployment of 3 replicas in the namespace default.
func createDeployment(t *testing.T, c client.Client, name string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: name}}}}},
	}
	if err := c.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// createAutoscaled creates the Deployment web of 3 replicas, all available, and its
// HorizontalPodAutoscaler of minReplicas 3 and the given maxReplicas.
func createAutoscaled(t *testing.T, c client.Client, maxReplicas int32) (*appsv1.Deployment, *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	ctx := context.Background()
	d := createDeployment(t, c, "web")
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: maxReplicas,
		},
	}
	if err := c.Create(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	return d, hpa
}

// TestBoundsPatchRealAPIServer: on kube-apiserver, the responder raises an autoscaler's bounds
// for a surge, from the trimmed copy its cache holds (the metrics it does not keep stay), with a
// record of what they were; a write decided before someone changed the autoscaler is refused
// (a conflict); decided again once the surge is over, the bound it set returns, the one
// someone changed stays theirs, and the record goes.
func TestBoundsPatchRealAPIServer(t *testing.T) {
	c, _ := realAPIServer(t)
	ctx := context.Background()
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}},
		},
	}
	if err := c.Create(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, Clock: clock.RealClock{}}
	read := func() *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		got := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	cached := func() *autoscalingv2.HorizontalPodAutoscaler {
		got := read()
		cachetrim.HorizontalPodAutoscaler(got)
		return got
	}
	decideBounds := func(surge *surgepolicy.State) deploymentdecide.Decision {
		var p deploymentdecide.Decision
		p.Autoscalers([]*autoscalingv2.HorizontalPodAutoscaler{cached()}, "web", surge)
		return p
	}

	raise := decideBounds(&surgepolicy.State{OriginalReplicas: 3, Surge: 1, StartTime: metav1.NowMicro()})
	if err := r.writeBounds(ctx, raise.Raise); err != nil {
		t.Fatal(err)
	}
	got := read()
	rec, err := surgepolicy.ParseBounds(got)
	if *got.Spec.MinReplicas != 4 || got.Spec.MaxReplicas != 4 || err != nil || rec == nil || *rec.MinReplicas != 3 || rec.MaxReplicas != 3 || len(got.Spec.Metrics) != 1 {
		t.Fatalf("raised: min %d max %d metrics %d record %v (%v); want 4, 4, the metric kept, a record of 3, 3",
			*got.Spec.MinReplicas, got.Spec.MaxReplicas, len(got.Spec.Metrics), rec, err)
	}

	// The surge is over, decided from a read older than someone's change of maxReplicas.
	stale := decideBounds(nil)
	got.Spec.MaxReplicas = 6
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := r.writeBounds(ctx, stale.Restore); !apierrors.IsConflict(err) {
		t.Fatalf("restore decided before someone's change: %v; want a conflict", err)
	}
	if err := r.writeBounds(ctx, decideBounds(nil).Restore); err != nil {
		t.Fatal(err)
	}
	got = read()
	if *got.Spec.MinReplicas != 3 {
		t.Errorf("restored: min %d; want 3", *got.Spec.MinReplicas)
	}
	if got.Spec.MaxReplicas != 6 {
		t.Errorf("restored: max %d; want 6 (theirs)", got.Spec.MaxReplicas)
	}
	if rec := got.Annotations[evacuation.SurgeBoundsAnnotation]; rec != "" {
		t.Errorf("restored: bounds record %q; want none", rec)
	}
	if len(got.Spec.Metrics) != 1 {
		t.Errorf("restored: %d metrics; want the metric kept", len(got.Spec.Metrics))
	}
}

// TestAutoscalerScalesFirstRealAPIServer: on kube-apiserver, the HorizontalPodAutoscaler
// controller, woken by the raise of its minReplicas, scales the Deployment to the raised minimum
// before the responder's own scale patch, which is then refused (the spec changed since the
// decision). Decided again, the responder takes the Deployment's count for the surge the
// autoscaler's record names and writes its surge record: the surge goes on, its end scales the
// Deployment back to the replicas its user set, and the next decision restores the bounds.
func TestAutoscalerScalesFirstRealAPIServer(t *testing.T) {
	c, cfg := realAPIServer(t)
	ctx := context.Background()
	d, hpa := createAutoscaled(t, c, 3)
	// The pod asked to leave is accepted and marked already: the plans write no pod.
	pods := []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}
	observe := func() deploymentdecide.Input {
		t.Helper()
		got, h := &appsv1.Deployment{}, &autoscalingv2.HorizontalPodAutoscaler{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), h); err != nil {
			t.Fatal(err)
		}
		return deploymentdecide.Input{Deployment: got, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)}, Pods: pods,
			Autoscalers: []*autoscalingv2.HorizontalPodAutoscaler{h}, Now: now, SurgeTimeout: time.Minute}
	}

	// The autoscaler scales the Deployment to its new minimum as soon as its bounds are raised.
	ww, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	autoscaling := interceptor.NewClient(ww, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
				scale := &autoscalingv1.Scale{}
				if err := c.SubResource("scale").Get(ctx, d, scale); err != nil {
					return err
				}
				scale.Spec.Replicas = *h.Spec.MinReplicas
				return c.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale))
			}
			return nil
		},
	})
	in := observe()
	p := deploymentdecide.Decide(in)
	if len(p.Raise) != 1 {
		t.Fatalf("first decision: raise %v; want the bounds raised", p.Raise)
	}
	if p.Scale == nil || p.Scale.Replicas != 4 {
		t.Fatalf("first decision: scale %+v; want a surge to 4", p.Scale)
	}
	r := &Reconciler{Client: autoscaling, Recorder: discard{}, Clock: clock.RealClock{}}
	if _, err := r.apply(ctx, in.Deployment, pods, responder.View{}, p); !apierrors.IsConflict(err) {
		t.Fatalf("the responder's scale after the autoscaler's: %v; want a conflict", err)
	}

	in = observe()
	if *in.Deployment.Spec.Replicas != 4 {
		t.Fatalf("after the autoscaler's scale: replicas %d; want 4", *in.Deployment.Spec.Replicas)
	}
	if rec := in.Deployment.Annotations[evacuation.SurgeAnnotation]; rec != "" {
		t.Fatalf("after the autoscaler's scale: surge record %q; want none", rec)
	}
	p = deploymentdecide.Decide(in)
	r.Client = c
	if _, err := r.apply(ctx, in.Deployment, pods, responder.View{}, p); err != nil {
		t.Fatal(err)
	}
	in = observe()
	state, err := surgepolicy.Parse(in.Deployment)
	if err != nil || state == nil || state.OriginalReplicas != 3 || state.Surge != 1 || *in.Deployment.Spec.Replicas != 4 {
		t.Fatalf("decided again: replicas %d, surge record %v (%v); want the surge of 1 from 3 adopted", *in.Deployment.Spec.Replicas, state, err)
	}

	// The replacement is available: scaled back; the bounds restored by the decision that finds
	// it scaled back.
	pods = append(pods, pod("s", created(5), decidetest.Since(corev1.PodReady, 1)))
	in.Deployment.Status = appsv1.DeploymentStatus{ObservedGeneration: in.Deployment.Generation, Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
	if err := c.Status().Update(ctx, in.Deployment); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		in = observe()
		p = deploymentdecide.Decide(in)
		if _, err := r.apply(ctx, in.Deployment, pods, responder.View{}, p); err != nil {
			t.Fatal(err)
		}
		pods = pods[1:] // the ReplicaSet removed the pod asked to leave
	}
	in = observe()
	h := in.Autoscalers[0]
	if *in.Deployment.Spec.Replicas != 3 {
		t.Errorf("the surge over: replicas %d; want 3", *in.Deployment.Spec.Replicas)
	}
	if rec := in.Deployment.Annotations[evacuation.SurgeAnnotation]; rec != "" {
		t.Errorf("the surge over: surge record %q; want none", rec)
	}
	if *h.Spec.MinReplicas != 3 {
		t.Errorf("the surge over: the autoscaler's minReplicas %d; want 3", *h.Spec.MinReplicas)
	}
	if h.Spec.MaxReplicas != 3 {
		t.Errorf("the surge over: the autoscaler's maxReplicas %d; want 3", h.Spec.MaxReplicas)
	}
	if rec := h.Annotations[evacuation.SurgeBoundsAnnotation]; rec != "" {
		t.Errorf("the surge over: the autoscaler's bounds record %q; want none", rec)
	}
}

// TestAutoscalerLateScaleRealAPIServer: on kube-apiserver, the HorizontalPodAutoscaler
// controller takes a decision from the bounds raised for a surge (it read them before they were
// restored) and carries it out after the surge is rolled back and the bounds restored: it scales
// the Deployment to its raised minReplicas. The responder keeps the record of the restored
// bounds until the autoscaler reports that it acted on them (status.observedGeneration, as the
// cache keeps it), undoes that count meanwhile, and removes the record once the autoscaler
// settled: the Deployment ends at the replicas its user set, the autoscaler at its bounds with
// no record.
func TestAutoscalerLateScaleRealAPIServer(t *testing.T) {
	c, _ := realAPIServer(t)
	ctx := context.Background()
	d, hpa := createAutoscaled(t, c, 5)
	readHPA := func() *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	// report is the autoscaler's status write once it acted on generation with the count found.
	report := func(generation int64, current int32) {
		t.Helper()
		h := readHPA()
		h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: ptr.To(generation), CurrentReplicas: current, DesiredReplicas: current}
		if err := c.Status().Update(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	report(readHPA().Generation, 3)
	pods := []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}
	observe := func() deploymentdecide.Input {
		t.Helper()
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			t.Fatal(err)
		}
		h := readHPA()
		cachetrim.HorizontalPodAutoscaler(h)
		return deploymentdecide.Input{Deployment: got, ReplicaSets: []*appsv1.ReplicaSet{replicaSet("rs", 3)}, Pods: pods,
			Autoscalers: []*autoscalingv2.HorizontalPodAutoscaler{h}, Now: now, SurgeTimeout: time.Minute}
	}
	r := &Reconciler{Client: c, Recorder: discard{}, Clock: clock.RealClock{}}
	step := func(what string) deploymentdecide.Decision {
		t.Helper()
		in := observe()
		p := deploymentdecide.Decide(in)
		if _, err := r.apply(ctx, in.Deployment, pods, responder.View{}, p); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return p
	}
	expect := func(what string, replicas, minReplicas int32, restored bool) {
		t.Helper()
		in := observe()
		rec, err := surgepolicy.ParseBounds(in.Autoscalers[0])
		if *in.Deployment.Spec.Replicas != replicas {
			t.Fatalf("%s: replicas %d; want %d", what, *in.Deployment.Spec.Replicas, replicas)
		}
		if got := surgepolicy.MinReplicas(in.Autoscalers[0]); got != minReplicas {
			t.Fatalf("%s: the autoscaler's minReplicas %d; want %d", what, got, minReplicas)
		}
		if err != nil {
			t.Fatalf("%s: the autoscaler's bounds record: %v", what, err)
		}
		if (rec != nil) != restored {
			t.Fatalf("%s: bounds record %v; want a record %t", what, rec, restored)
		}
		if rec != nil && rec.Restored == nil {
			t.Fatalf("%s: bounds record %v; want one of restored bounds", what, rec)
		}
	}

	p := step("the surge")
	if p.Scale == nil || p.Scale.Replicas != 4 {
		t.Fatalf("first decision: scale %+v; want a surge to 4", p.Scale)
	}
	if len(p.Raise) != 1 {
		t.Fatalf("first decision: raise %v; want the bounds raised", p.Raise)
	}
	// The autoscaler reads its raised bounds (minReplicas 4), and takes a while to act on them.
	raisedGeneration := readHPA().Generation
	pods = append(pods, pod("s", created(5)))
	pods[0] = pod("a", withMark) // the request withdrawn
	step("the rollback")
	step("the restore")
	expect("rolled back and restored", 3, 3, true)

	// Its decision from the raised bounds lands: the Deployment to 4, the status report of the
	// generation it read refused (its resourceVersion is older than the restore).
	scale := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, d, scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 4
	if err := c.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	if p := step("after the autoscaler's late scale"); p.Scale == nil || p.Scale.Replicas != 3 {
		t.Fatalf("after the autoscaler's late scale: scale %+v; want back to 3", p.Scale)
	}
	expect("the late scale undone", 3, 3, true)

	// It acts on the restored bounds: it finds 3 and reports it; the record goes.
	restoredGeneration := readHPA().Generation
	if restoredGeneration <= raisedGeneration {
		t.Fatalf("the autoscaler's generation %d after the restore, %d raised; want it bumped by the restore", restoredGeneration, raisedGeneration)
	}
	report(raisedGeneration, 4)
	step("the autoscaler reporting the raised bounds")
	expect("its report of the raised bounds", 3, 3, true)
	report(restoredGeneration, 3)
	step("the autoscaler settled")
	expect("settled", 3, 3, false)
}
