package deploymentdecide

// The surge bookkeeping: the pods a surge created, how long it may make no progress, its growth
// and its rollback, and the plan's scale and surge record on the Deployment in memory.

import (
	"cmp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// surgePods are the pods a surge created: the newest ones created since it started (creation
// times are in seconds) that nobody asked to leave, at most its size.
func surgePods(live []*corev1.Pod, state *surgepolicy.State) []*corev1.Pod {
	var created []*corev1.Pod
	for _, pod := range live {
		if !pod.CreationTimestamp.Time.Before(state.StartTime.Truncate(time.Second)) && !evacuation.Requested(pod) {
			created = append(created, pod)
		}
	}
	slices.SortFunc(created, func(a, b *corev1.Pod) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	return created[:min(len(created), int(state.Surge))]
}

// lastProgress is when the surge last moved: its start, or the latest time one of the pods it
// created (surgePods) was created, scheduled, initialized or became ready. A surge gives up
// only after its patience without progress, as a Deployment's progressDeadlineSeconds counts:
// on a busy cluster the scheduler may take minutes to place every replacement of every
// Deployment surging at once, and a surge whose pods keep arriving is slow, not stuck. Giving
// it up would throw its replacements away and evict the pods instead.
func lastProgress(created []*corev1.Pod, state *surgepolicy.State) time.Time {
	last := state.StartTime.Time
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	for _, pod := range created {
		later(pod.CreationTimestamp.Time)
		for _, c := range pod.Status.Conditions {
			switch c.Type {
			case corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady:
				if c.Status == corev1.ConditionTrue {
					later(c.LastTransitionTime.Time)
				}
			}
		}
	}
	return last
}

// patience is how long a surge may make no progress before it gives up. The surge timeout is
// the bound for replacements that show a problem: one that cannot be placed (no capacity, every
// other node cordoned), one whose containers fail to start, or a ReplicaSet that fails to create
// them (a quota, an admission webhook). A surge that is only slow, its replacements waiting for
// kube-controller-manager, the scheduler or their kubelets on a busy cluster (slow image pulls),
// waits as it would for any scale-up of the Deployment: up to the Deployment's own
// progressDeadlineSeconds when that is longer, the bound after which its owner considers a
// rollout stuck. minReadySeconds comes on top.
func patience(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, created []*corev1.Pod, surgeTimeout time.Duration) time.Duration {
	wait := surgeTimeout
	if !slices.ContainsFunc(created, InTrouble) && !slices.ContainsFunc(replicaSets, failingToCreate) {
		progressDeadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, defaultProgressDeadlineSeconds)) * time.Second
		wait = max(wait, progressDeadline)
	}
	return wait + time.Duration(d.Spec.MinReadySeconds)*time.Second
}

// defaultProgressDeadlineSeconds is the API server's default of a Deployment's
// spec.progressDeadlineSeconds.
const defaultProgressDeadlineSeconds = 600

// failedToStart are the reasons of a waiting container that a kubelet gives when the container
// does not start and will not without a change (an image that does not exist, a missing Secret)
// or keeps failing.
var failedToStart = []string{"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}

// InTrouble reports whether a replacement shows that it may never become Ready: the scheduler
// found no node for it, it failed, or one of its containers waits on a failure.
func InTrouble(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if c := evacuation.Condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return true
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.State.Waiting != nil && slices.Contains(failedToStart, cs.State.Waiting.Reason) {
				return true
			}
		}
	}
	return false
}

// failingToCreate reports whether the ReplicaSet controller fails to create the ReplicaSet's
// pods (condition ReplicaFailure, e.g. a quota exceeded).
func failingToCreate(rs *appsv1.ReplicaSet) bool {
	return slices.ContainsFunc(rs.Status.Conditions, func(c appsv1.ReplicaSetCondition) bool {
		return c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue
	})
}

// extend decides whether the surge in progress grows, up to maxSurge, by the pods asked to leave
// since it started: a requester asks node by node, and a wave that started with the first
// node's pods would otherwise leave the next nodes' to waves of their own, each waiting for the
// one before it to complete. It grows once the requests stop coming (gathering), as a wave
// starts; it then completes when all of its replacements are available. Every pod it evacuates
// is marked already (markEvacuated marks all of them during a surge).
func (p *Decision) extend(in Input, live []*corev1.Pod, state *surgepolicy.State, el surgepolicy.Eligibility) {
	candidates := evacuated(live, el)
	k := min(el.Surge, int32(len(candidates)))
	if k <= state.Surge {
		return
	}
	if wait := gathering(candidates, el.Surge, in.Now); wait > 0 {
		p.RequeueAfter = recheck.Soonest(p.RequeueAfter, wait)
		return
	}
	grown := *state
	grown.Surge = k
	p.Scale = &ScaleChange{Replicas: state.OriginalReplicas + k, Surge: &grown}
	p.Events = append(p.Events, Event{Reason: SurgeExtended, Original: state.OriginalReplicas, Was: state.Surge, Surge: k, Asked: len(candidates)})
}

// Rollback ends a surge without completing it: the pods the surge created are marked to go
// first, the evacuated pods unmarked, and spec.replicas returns to the original count. Its marks
// replace any the plan had; the evacuated pods are marked again once the scale-down is done
// (markEvacuated). why is the cause: an Event with its Rollback reason and the facts that go
// with it, which Rollback completes into the SurgeRolledBack Event.
func (p *Decision) Rollback(live []*corev1.Pod, state *surgepolicy.State, why Event) {
	p.RolledBack = true
	p.Mark, p.Unmark = nil, nil
	created := surgePods(live, state)
	for _, pod := range live {
		switch in := slices.Contains(created, pod); {
		case in && !marks.IsMarked(pod):
			p.Mark = append(p.Mark, pod)
		case !in && marks.IsMarked(pod):
			p.Unmark = append(p.Unmark, pod)
		}
	}
	p.Scale = &ScaleChange{Replicas: state.OriginalReplicas}
	why.Reason, why.Original, why.Surge, why.Pods = SurgeRolledBack, state.OriginalReplicas, state.Surge, names(created)
	p.Events = append(p.Events, why)
}

// ApplyScale sets the plan's spec.replicas and surge record (or their removal) on the
// Deployment in memory.
func (p Decision) ApplyScale(d *appsv1.Deployment) {
	if p.DropSurge {
		marks.SetAnnotation(d, evacuation.SurgeAnnotation, nil)
	}
	switch {
	case p.Reverted != nil:
		marks.SetAnnotation(d, evacuation.SurgeRevertedAnnotation, ptr.To(p.Reverted.String()))
	case p.DropReverted:
		marks.SetAnnotation(d, evacuation.SurgeRevertedAnnotation, nil)
	}
	if p.Scale != nil {
		d.Spec.Replicas = ptr.To(p.Scale.Replicas)
		if p.Scale.Surge != nil {
			marks.SetAnnotation(d, evacuation.SurgeAnnotation, ptr.To(p.Scale.Surge.String()))
		} else {
			marks.SetAnnotation(d, evacuation.SurgeAnnotation, nil)
		}
	}
}
