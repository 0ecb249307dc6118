package observe

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
)

// A node's report holds while the node and the maintenances selecting it are as they were when
// it was decided, as far as the node controller's watches tell; any change its decision reads
// outdates it.
func TestReportsHoldWhileTheirBasisDoes(t *testing.T) {
	node := func() *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Labels: map[string]string{"pool": "a"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	nm := func() *nodemaintv1alpha1.NodeMaintenance {
		return &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "u", Generation: 1, ResourceVersion: "5"},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true}}
	}
	r := NewReports()
	rep := nodedecide.Report{Pending: 3}
	r.Put(node(), []*nodemaintv1alpha1.NodeMaintenance{nm()}, rep)

	got, ok := r.Of(node(), []*nodemaintv1alpha1.NodeMaintenance{nm()})
	if !ok {
		t.Fatal("the report of an unchanged node and maintenance does not hold")
	}
	if got.Pending != 3 {
		t.Errorf("report says %d pending, want 3", got.Pending)
	}

	// Changes the node's decision does not read leave the report holding: the kubelet's
	// heartbeat, another resourceVersion, the maintenance's status written with nothing the
	// node reads changed.
	heartbeat := node()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	statusWritten := nm()
	statusWritten.ResourceVersion = "6"
	statusWritten.Status.PodsPendingEvacuation = 3
	statusWritten.Status.DrainStartTime = &metav1.Time{Time: time.Now()}
	if _, ok := r.Of(heartbeat, []*nodemaintv1alpha1.NodeMaintenance{statusWritten}); !ok {
		t.Error("a heartbeat and a status write outdate the report")
	}

	for name, change := range map[string]func(*corev1.Node, *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance{
		"node labels": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			n.Labels["pool"] = "b"
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"node cordoned": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			n.Spec.Unschedulable = true
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"node not Ready": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"node rebooted": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			n.Status.NodeInfo.BootID = "b2"
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"maintenance spec": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			m.Generation = 2
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"maintenance phase": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			m.Spec.Drain, m.Spec.Cordon = false, false
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"maintenance deleted": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"the node's turn": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			m.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{InTurn: []nodemaintv1alpha1.NodeTurn{{Name: "n1"}}}
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"another maintenance": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			o := nm()
			o.Name, o.UID = "other", "u2"
			return []*nodemaintv1alpha1.NodeMaintenance{m, o}
		},
		"maintenance replaced": func(n *corev1.Node, m *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			m.UID = "u3"
			return []*nodemaintv1alpha1.NodeMaintenance{m}
		},
		"no maintenance": func(*corev1.Node, *nodemaintv1alpha1.NodeMaintenance) []*nodemaintv1alpha1.NodeMaintenance {
			return nil
		},
	} {
		n, m := node(), nm()
		if _, ok := r.Of(n, change(n, m)); ok {
			t.Errorf("%s: the report still holds", name)
		}
	}

	r.Forget("n1")
	if _, ok := r.Of(node(), []*nodemaintv1alpha1.NodeMaintenance{nm()}); ok {
		t.Error("the report of a forgotten node holds")
	}
	var none *Reports
	if _, ok := none.Of(node(), nil); ok {
		t.Error("no store holds a report")
	}
}

// A changed report brings the maintenances it concerns to the NodeMaintenance controller's queue:
// those selecting the node and those its annotation names; an unchanged one brings none.
func TestReportChangesReconcileTheirMaintenances(t *testing.T) {
	r := NewReports()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := r.Source(0).Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: "gone=Drain"}}}
	nms := []*nodemaintv1alpha1.NodeMaintenance{{ObjectMeta: metav1.ObjectMeta{Name: "m"}}}

	r.Put(node, nms, nodedecide.Report{Pending: 2})
	if got := drainQueue(q); len(got) != 2 || !got["m"] || !got["gone"] {
		t.Errorf("queued %v after the first report, want m and gone", got)
	}
	r.Put(node, nms, nodedecide.Report{Pending: 2})
	if got := drainQueue(q); len(got) != 0 {
		t.Errorf("queued %v after the same report, want none", got)
	}
	r.Put(node, nms, nodedecide.Report{Pending: 1})
	if got := drainQueue(q); len(got) != 2 {
		t.Errorf("queued %v after a changed report, want m and gone", got)
	}
}

// drainQueue returns the names queued.
func drainQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) map[string]bool {
	got := map[string]bool{}
	for q.Len() > 0 {
		req, _ := q.Get()
		got[req.Name] = true
		q.Done(req)
	}
	return got
}

// NodeChanged passes a node event exactly when a report decided from the old node no longer holds
// for the new one: a heartbeat is let through neither.
func TestNodeChangedIsTheReportsBasis(t *testing.T) {
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	heartbeat := old.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	relabelled := old.DeepCopy()
	relabelled.Labels["pool"] = "b"
	for name, tc := range map[string]struct {
		n    *corev1.Node
		want bool
	}{"heartbeat": {heartbeat, false}, "relabelled": {relabelled, true}} {
		if got := NodeChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.n}); got != tc.want {
			t.Errorf("%s: NodeChanged %v, want %v", name, got, tc.want)
		}
		if got := !basisOfNode(old).equal(basisOfNode(tc.n)); got != tc.want {
			t.Errorf("%s: report outdated %v, want %v", name, got, tc.want)
		}
	}
}
