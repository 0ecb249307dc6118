package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/testenv"
)

// heldByBudget is a pod of the ReplicaSet rs (owned by the Deployment "series", which need not
// exist) refused by the budget "series", with the decision that holds it for the maintenance.
func heldByBudget(t *testing.T, name string) (*corev1.Pod, *nodemaintv1alpha1.NodeMaintenance) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": name}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-7d4b9",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "deployment-" + "uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}}}
	for _, o := range []client.Object{pdb, rs} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-7d4b9-x2x", UID: "pod-" + "uid", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}}}
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "nm-uid"}}
	return pod, nm
}

// TestAppOwnerEventsOnceAndOneSeries: however often the node is looked at, a hold's Events are
// recorded once per refresh; on kube-apiserver, with the event recorder nodemaint runs, they are
// one Event on the budget and one on the Deployment (found from the pod's ReplicaSet), whose
// series counts the refresh, from other nodes and pods alike.
func TestAppOwnerEventsOnceAndOneSeries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pod, nm := heldByBudget(t, "series")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "series-node"}}
	hold := nodedecide.Hold{Pod: pod, Reason: nodedecide.ReasonBudgetBlocksDrain, Maintenances: []*nodemaintv1alpha1.NodeMaintenance{nm}, Quoted: "refused"}
	d := nodedecide.Decision{Holds: []nodedecide.Hold{hold}}
	now := time.Now()

	// Every look of one refresh: one recording per object.
	fake := events.NewFakeRecorder(100)
	r := &Reconciler{Client: k8s, Recorder: fake, Observer: &observe.Observer{}}
	for i := range 50 {
		if next := r.tellAppOwners(ctx, node, d, 0, now.Add(time.Duration(i)*time.Second)); next != appOwnerRefresh {
			t.Fatalf("next look in %v; want the refresh, %v", next, appOwnerRefresh)
		}
	}
	if n := len(fake.Events); n != 2 {
		t.Fatalf("%d Events recorded over 50 looks; want 2 (the budget, the Deployment)", n)
	}
	r.tellAppOwners(ctx, node, d, 0, now.Add(appOwnerRefresh))
	if n := len(fake.Events); n != 4 {
		t.Fatalf("%d Events recorded after the refresh; want 4", n)
	}

	// On kube-apiserver: the repeats, from another node and another pod of the Deployment, are
	// one Event per object with a series.
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	r = &Reconciler{Client: k8s, Recorder: broadcaster.NewRecorder(testenv.Scheme, "nodemaint-controller"), Observer: &observe.Observer{}}
	r.tellAppOwners(ctx, node, d, 0, now)
	eventually(t, "one Event on the budget, one on the Deployment", func(ctx context.Context) (bool, string, error) {
		evs, err := appOwnerEventsOf(ctx, nm.Name)
		return len(evs) == 2, fmt.Sprint(evs), err
	})
	other := *pod.DeepCopy()
	other.Name, other.UID = "series-7d4b9-y3y", "pod-uid-2"
	later := nodedecide.Decision{Holds: []nodedecide.Hold{{Pod: &other, Reason: hold.Reason, Maintenances: hold.Maintenances, Quoted: hold.Quoted}}}
	for i := range 3 {
		r.tellAppOwners(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "another-node"}}, later, 0, now.Add(time.Duration(i+1)*appOwnerRefresh))
	}
	eventually(t, "the Events' series counting the refresh", func(ctx context.Context) (bool, string, error) {
		evs, err := appOwnerEventsOf(ctx, nm.Name)
		if len(evs) != 2 {
			return false, fmt.Sprint(evs), err
		}
		for _, ev := range evs {
			if ev.Series == nil || ev.Series.Count < 2 {
				return false, fmt.Sprint(evs), err
			}
		}
		return true, "", err
	})
	evs, err := appOwnerEventsOf(ctx, nm.Name)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, ev := range evs {
		kinds[ev.Regarding.Kind] = ev.Regarding.Name
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("event %s: type %s; want a Warning", ev.Name, ev.Type)
		}
		if ev.Namespace != "default" {
			t.Errorf("event %s: in namespace %s; want default", ev.Name, ev.Namespace)
		}
		if ev.Related == nil || ev.Related.Name != nm.Name {
			t.Errorf("event %s: related %+v; want the maintenance %s", ev.Name, ev.Related, nm.Name)
		}
	}
	for _, kind := range []string{"PodDisruptionBudget", "Deployment"} {
		if kinds[kind] != "series" {
			t.Errorf("events regard %v; want the %s series", kinds, kind)
		}
	}
}

// appOwnerEventsOf lists the Events for application owners related to the maintenance.
func appOwnerEventsOf(ctx context.Context, maintenance string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace("default")); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Reason == nodedecide.ReasonBudgetBlocksDrain && ev.Related != nil && ev.Related.Name == maintenance {
			out = append(out, ev)
		}
	}
	return out, nil
}
