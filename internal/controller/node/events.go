package node

import (
	"fmt"
	"time"

	"github.com/nodemaint/nodemaint/internal/controller/eventsink"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Every Event the node controller emits is built here, from what a decision or a write did: the
// reasons and the words an admin reads in `kubectl events` are in one place. The Events for
// application owners, on the budgets and workloads of the pods a drain waits on, are decided and
// worded in nodedecide (AppOwnerEvents), where they are tested without a cluster.

// eventSink emits the controller's Events.
type eventSink struct{ eventsink.Sink }

// sinkOf is the eventSink of a recorder.
func sinkOf(r events.EventRecorder) eventSink { return eventSink{eventsink.Sink{EventRecorder: r}} }

// nodeWritten: the node was written as the decision wanted.
func (e eventSink) nodeWritten(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance, d nodedecide.Decision) {
	names := maintenanceNames(d.Intent)
	switch c := d.Change; {
	case c.Reverted:
		e.Warning(node, nil, "UncordonReverted", "Cordon",
			"node was uncordoned while NodeMaintenance "+names+" keeps it cordoned; cordoned it again")
		for _, nm := range nms {
			if maintenance.Cordons(maintenance.Phase(nm, false)) {
				e.Warning(nm, node, "UncordonReverted", "Cordon", "node "+node.Name+" was uncordoned during the maintenance; cordoned it again")
			}
		}
	case c.Cordoned:
		e.Normal(node, nil, "Cordoned", "Cordon", "cordoned for NodeMaintenance "+names)
	case c.Uncordoned:
		e.Normal(node, nil, "Uncordoned", "Uncordon", "maintenance complete; uncordoned")
	}
	switch c := d.Change; {
	case c.OutOfService:
		e.Warning(node, nil, "OutOfService", "Taint", "NotReady for over "+d.Intent.OutOfServiceGrace.String()+
			" with pods stuck terminating: tainted "+corev1.TaintNodeOutOfService+" so they fail over")
	case c.BackInService:
		e.Normal(node, nil, "BackInService", "Taint", "removed the "+corev1.TaintNodeOutOfService+" taint")
	}
}

// shutdownNotConfirmed: the out-of-service taint is due, the node NotReady for over grace, but for
// the evidence of a shutdown; the Event says what evidence counts.
func (e eventSink) shutdownNotConfirmed(node *corev1.Node, grace time.Duration) {
	e.Warning(node, nil, "ShutdownNotConfirmed", "Taint", fmt.Sprintf("NotReady for over %s with pods stuck terminating, but with no evidence that it was shut down: "+
		"not tainting %s (a network partition looks the same). Evidence is the taint %s, or the annotation %s set to the node's bootID %q",
		grace, corev1.TaintNodeOutOfService, nodemaintv1alpha1.CloudProviderShutdownTaint,
		nodemaintv1alpha1.ShutdownConfirmedAnnotation, node.Status.NodeInfo.BootID))
}

// requested: nodemaint's evacuation request was set on the pod (orig: before).
func (e eventSink) requested(orig *corev1.Pod) {
	if drain.Unanswerable(orig) && !evacuation.RequestedBy(orig, evacuation.ReasonNodeMaintenance) {
		e.Warning(orig, nil, "BarePod", "RequestEvacuation",
			"evacuation requested for node maintenance; this pod has no controller: once evicted it will not be recreated")
	}
}

// evictionFailed and evictionRefused: the first time in a row a pod's eviction fails or is
// refused (first), and not again while it backs off.
func (e eventSink) evictionFailed(pod *corev1.Pod, err error, first bool) {
	if first {
		e.Warning(pod, nil, nodemaintv1alpha1.BlockedReasonEvictionFailed, "Evict", "node maintenance: "+err.Error())
	}
}

func (e eventSink) evictionRefused(pod *corev1.Pod, refusal string, first bool) {
	if first {
		e.Warning(pod, nil, "EvictionRefused", "Evict", "node maintenance: "+refusal)
	}
}

// appOwner: an Event for an application's owner, on its budget or workload (namespaced, where
// `kubectl get events -n` shows it), related to the maintenance.
func (e eventSink) appOwner(ev nodedecide.AppOwnerEvent) {
	ref := ev.Regarding
	e.Warning(&ref, ev.Maintenance, ev.Reason, "Drain", ev.Note)
}

// deleted: the pod was deleted after the drain of its node timed out.
func (e eventSink) deleted(pod *corev1.Pod, node *corev1.Node) {
	e.Warning(pod, node, "DeletedAfterDrainTimeout", "Delete",
		"deleted, bypassing PodDisruptionBudgets: the drain of node "+node.Name+" timed out and drainTimeoutAction is Delete")
}

// forbidden makes a permission error (a role narrowed below what config/rbac grants) visible
// where the admin looks, on the maintenances of the node; otherwise it would show only as a
// maintenance that makes no progress and an error in the controller's log.
func (e eventSink) forbidden(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance, err error) {
	for _, nm := range nms {
		e.Warning(nm, node, "Forbidden", "Reconcile", "node "+node.Name+": nodemaint is not allowed to do its work, check its RBAC: "+err.Error())
	}
}

// maintenanceNames names a few of the maintenances acting on the node (few.Names).
func maintenanceNames(intent maintenance.NodeIntent) string {
	names := make([]string, 0, len(intent.Entries))
	for _, e := range intent.Entries {
		names = append(names, e.Name)
	}
	return few.Names(names, few.Most)
}
