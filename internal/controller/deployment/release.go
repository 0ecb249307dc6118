package deployment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/responder"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Release ends the responder's work on one Deployment for good, as when nodemaint is uninstalled
// (kubectl maintenance cleanup): from now on nobody answers its pods' evacuation requests. It
// decides as the responder does once every request is withdrawn, so a surge in progress is rolled
// back exactly as when a maintenance ends early (the surge's pods marked to go first, spec.replicas
// back to the original count, the surge record removed), the pods' EvacuationInitiated answers are
// withdrawn, marks are removed once the ReplicaSet removed the surge's pods, the ReplicaSets'
// markers go, and an autoscaler's bounds raised for a surge are restored (after the scale-back).
// Requests themselves are not touched: withdrawing its own is each requester's job.
//
// pods are the pods of replicaSets, the Deployment's ReplicaSets; hpas the
// HorizontalPodAutoscalers of its namespace (those that concern it are picked). Unless dryRun, the decision is
// carried out with c. Release returns one line per change (done, or to be done with dryRun), and
// whether the Deployment needs another call later: pods are still marked, waiting for their
// ReplicaSet to remove them.
func Release(ctx context.Context, c client.Client, d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod,
	hpas []*autoscalingv2.HorizontalPodAutoscaler, dryRun bool) (changes []string, again bool, err error) {
	// Decide on copies of the pods without their requests; carry out on the pods as they are, so
	// that another requester's request stays.
	unrequested := make([]*corev1.Pod, len(pods))
	original := make(map[*corev1.Pod]*corev1.Pod, len(pods))
	for i, pod := range pods {
		cp := pod.DeepCopy()
		evacuation.RemoveCondition(cp, evacuation.Request)
		unrequested[i], original[cp] = cp, pod
	}
	// With the autoscalers, a surge the autoscaler carried out before the responder recorded it
	// is adopted, then rolled back as any other.
	mine := autoscalersOfDeployment(d, hpas)
	in := deploymentdecide.Input{Deployment: d, ReplicaSets: replicaSets, Pods: unrequested, Autoscalers: mine, Now: timeNow(), SurgeTimeout: DefaultSurgeTimeout}
	p := deploymentdecide.Decide(in)
	rollBackWaiting(&p, d, unrequested)
	boundsHeld := releaseBounds(&p, d, mine)
	for i := range p.Answers {
		p.Answers[i].Pod = original[p.Answers[i].Pod]
	}
	for _, set := range []*[]*corev1.Pod{&p.Mark, &p.Unmark} {
		for i, pod := range *set {
			(*set)[i] = original[pod]
		}
	}

	key := d.Namespace + "/" + d.Name
	for _, e := range p.Events {
		changes = append(changes, fmt.Sprintf("deployment.apps/%s: %s: %s", key, e.Reason, e.Note()))
	}
	if p.DropSurge && p.Scale == nil {
		changes = append(changes, fmt.Sprintf("deployment.apps/%s: removed the surge record, spec.replicas stays %d", key, ptr.Deref(d.Spec.Replicas, 1)))
	}
	for _, a := range p.Answers {
		changes = append(changes, fmt.Sprintf("pod/%s/%s: removed %s", a.Pod.Namespace, a.Pod.Name, evacuation.Initiated))
	}
	for _, pod := range p.Unmark {
		changes = append(changes, fmt.Sprintf("pod/%s/%s: restored its pod-deletion-cost", pod.Namespace, pod.Name))
	}
	if p.DropReverted {
		changes = append(changes, fmt.Sprintf("deployment.apps/%s: removed annotation %s", key, evacuation.SurgeRevertedAnnotation))
	}
	if _, ok := d.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation]; ok {
		changes = append(changes, fmt.Sprintf("deployment.apps/%s: removed annotation %s", key, evacuation.DeploymentReplicasToEvacuateAnnotation))
	}
	after := d.DeepCopy()
	if p.Scale != nil || p.DropSurge {
		delete(after.Annotations, evacuation.SurgeAnnotation)
	}
	for _, rs := range replicaSets {
		want := marks.Markers(rs, unrequested, false, after.Annotations, false)
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if _, has := rs.Annotations[k]; has && want[k] == nil {
				changes = append(changes, fmt.Sprintf("replicaset.apps/%s/%s: removed annotation %s", rs.Namespace, rs.Name, k))
			}
		}
	}
	// Marked pods the ReplicaSet has yet to remove: the surge's pods after a rollback.
	for _, pod := range unrequested {
		if pod.DeletionTimestamp.IsZero() && (marks.IsMarked(pod) || containsPod(p.Mark, original[pod])) && !containsPod(p.Unmark, original[pod]) {
			again = true
		}
	}
	// The autoscalers' bounds are restored by a later call, once the Deployment is scaled back.
	again = again || boundsHeld
	if dryRun || len(changes) == 0 {
		return changes, again, nil
	}
	r := &Reconciler{Client: c, Recorder: discard{}, Clock: clock.RealClock{}}
	if _, err := r.apply(ctx, d, unrequested, responder.View{}, p); err != nil {
		return changes, true, err
	}
	if err := r.syncMarkers(ctx, d, in, false, false, true); err != nil {
		return changes, true, err
	}
	return changes, again, nil
}

// rollBackWaiting rolls back a surge deploymentdecide.Decide would still wait for (no evacuated pod left
// to tell it was withdrawn): nobody will complete it any more.
func rollBackWaiting(p *deploymentdecide.Decision, d *appsv1.Deployment, unrequested []*corev1.Pod) {
	state, err := surgepolicy.Parse(d)
	if err != nil || state == nil || p.Scale != nil || p.DropSurge {
		return
	}
	var live []*corev1.Pod
	for _, pod := range unrequested {
		if pod.DeletionTimestamp.IsZero() {
			live = append(live, pod)
		}
	}
	p.Rollback(live, state, deploymentdecide.Event{Rollback: deploymentdecide.RollbackReleased})
}

// autoscalersOfDeployment picks from hpas those that target the Deployment or whose record of
// raised bounds names it.
func autoscalersOfDeployment(d *appsv1.Deployment, hpas []*autoscalingv2.HorizontalPodAutoscaler) []*autoscalingv2.HorizontalPodAutoscaler {
	var mine []*autoscalingv2.HorizontalPodAutoscaler
	for _, hpa := range hpas {
		if hpa.Namespace == d.Namespace && slices.Contains(deploymentsOfAutoscaler(hpa), d.Name) {
			mine = append(mine, hpa)
		}
	}
	return mine
}

// releaseBounds decides the bounds of the Deployment's autoscalers (mine) once nothing surges
// any more: those raised for a surge are restored, whatever the plan said before, unless the
// plan scales the Deployment back (as Decide, they wait for a call that finds it scaled back:
// restored before, the autoscaler would race the scale-back). It reports whether they wait.
func releaseBounds(p *deploymentdecide.Decision, d *appsv1.Deployment, mine []*autoscalingv2.HorizontalPodAutoscaler) (held bool) {
	p.Events = slices.DeleteFunc(p.Events, func(e deploymentdecide.Event) bool {
		return e.OfAutoscaler()
	})
	if p.Scale != nil || p.DropSurge {
		p.Raise, p.Restore = nil, nil
		for _, hpa := range mine {
			if rec, err := surgepolicy.ParseBounds(hpa); err != nil || (rec != nil && rec.Deployment == d.Name) {
				held = true
			}
		}
		return held
	}
	p.Autoscalers(mine, d.Name, nil)
	return false
}

func containsPod(pods []*corev1.Pod, pod *corev1.Pod) bool {
	for _, p := range pods {
		if p == pod {
			return true
		}
	}
	return false
}

// timeNow is time.Now, replaced by tests.
var timeNow = time.Now

// discard is an event recorder that records nothing: Release reports its changes to its caller.
type discard struct{}

func (discard) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
}
