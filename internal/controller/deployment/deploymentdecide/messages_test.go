package deploymentdecide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
)

// TestEventNotes pins the words of the Events on the Deployment.
func TestEventNotes(t *testing.T) {
	six := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	for _, tc := range []struct {
		event             Event
		typ, action, note string
	}{
		{Event{Reason: SurgeStarted, Original: 3, Surge: 1, Asked: 1, Pods: []string{"p2"}}, corev1.EventTypeNormal, "Surge",
			"scaling from 3 to 4 replicas to evacuate 1 of the 1 pod asked to leave (p2), all marked to go first when it scales back"},
		{Event{Reason: SurgeExtended, Original: 4, Was: 2, Surge: 3, Asked: 3}, corev1.EventTypeNormal, "Surge",
			"scaling from 6 to 7 replicas: the surge evacuates 3 of the 3 pods asked to leave now, 1 more than before"},
		{Event{Reason: SurgeCompleted, Original: 3, Surge: 2, Asked: 6, Pods: six}, corev1.EventTypeNormal, "Surge",
			"2 replacements are available; scaled back to 3 replicas, which removes 2 of the 6 pods asked to leave (p0, p1, p2, p3, p4 and 1 more)"},
		{Event{Reason: SurgeRolledBack, Rollback: RollbackWithdrawn, Original: 5, Surge: 2, Asked: 1, Pods: []string{"p1"}}, corev1.EventTypeNormal, "Surge",
			"1 pod still to be evacuated for a surge of 2 (withdrawn: no pods); scaled back to 5 replicas, which removes the surge's pods p1"},
		{Event{Reason: SurgeRolledBack, Rollback: RollbackNoProgress, Patience: 2*time.Minute + time.Millisecond, Elapsed: 3*time.Hour + 201*time.Second,
			Original: 3, Surge: 1, Pods: []string{"p2"}}, corev1.EventTypeNormal, "Surge",
			"the replacements made no progress for 2m0s (3h3m21s after the surge started); scaled back to 3 replicas, which removes the surge's pods p2"},
		{Event{Reason: SurgeRolledBack, Rollback: RollbackIneligible, PolicyReason: surgepolicy.ReasonPaused, PolicyMessage: "the Deployment is paused: eviction moves its pods",
			Original: 2, Surge: 1, Pods: []string{"p6"}}, corev1.EventTypeNormal, "Surge",
			"the Deployment is paused: eviction moves its pods; scaled back to 2 replicas, which removes the surge's pods p6"},
		{Event{Reason: SurgeRolledBack, Rollback: RollbackReleased, Original: 2, Surge: 1}, corev1.EventTypeNormal, "Surge",
			"nodemaint's Deployment responder is being removed; scaled back to 2 replicas"},
		{Event{Reason: SurgeTimedOut, Pods: []string{"p3", "p4"}}, corev1.EventTypeWarning, "Evacuate",
			"gave up the evacuation of 2 pods (p3, p4): the Deployment's surge did not become available in time: eviction moves the pod"},
		{Event{Reason: EvacuationAccepted}, corev1.EventTypeNormal, "Evacuate",
			"accepted the evacuation of pods asked to leave their nodes: each leaves once a surged replacement is available (the pods' EvacuationInitiated condition)"},
		{Event{Reason: EvacuationDeclined, Pods: []string{"p4"}, PolicyReason: surgepolicy.ReasonMaxSurgeZero, PolicyMessage: "the Deployment's maxSurge is 0: eviction moves its pods"},
			corev1.EventTypeNormal, "Evacuate", "declined the evacuation of 1 pod (p4), MaxSurgeZero: the Deployment's maxSurge is 0: eviction moves its pods"},
		{Event{Reason: InvalidSurgeState, Problem: "annotation a: invalid", Replicas: 9}, corev1.EventTypeWarning, "Surge",
			"annotation a: invalid; removed it and left spec.replicas at 9"},
		{Event{Reason: ScaledDuringSurge, Replicas: 7, Original: 4, Surge: 2}, corev1.EventTypeWarning, "Surge",
			"spec.replicas was set to 7 during a surge from 4 to 6; keeping 7"},
		{Event{Reason: AutoscalerRaised, Autoscaler: "web", Replicas: 4, MinWas: 3, MaxWas: 3, Min: 4, Max: 4}, corev1.EventTypeNormal, "Surge",
			"raised HorizontalPodAutoscaler web from minReplicas 3, maxReplicas 3 to 4, 4 for the surge to 4 replicas, " +
				"so that it does not scale the Deployment back before the replacements are available; restored when the surge ends"},
		{Event{Reason: AutoscalerRestored, Autoscaler: "web", MinWas: 4, MaxWas: 4, Min: 3, Max: 3}, corev1.EventTypeNormal, "Surge",
			"the surge is over: HorizontalPodAutoscaler web back from minReplicas 4, maxReplicas 4 to 3, 3"},
		{Event{Reason: AutoscalerRestored, Autoscaler: "web", MinWas: 4, MaxWas: 6, Min: 3, Max: 6, Kept: []string{"maxReplicas"}}, corev1.EventTypeNormal, "Surge",
			"the surge is over: HorizontalPodAutoscaler web back from minReplicas 4, maxReplicas 6 to 3, 6 (maxReplicas changed by someone else during the surge: kept)"},
		{Event{Reason: InvalidBoundsRecord, Autoscaler: "web", Problem: "annotation b: invalid"}, corev1.EventTypeWarning, "Surge",
			"HorizontalPodAutoscaler web: annotation b: invalid; removed it and left its bounds as they are"},
	} {
		if typ := tc.event.Type(); typ != tc.typ {
			t.Errorf("%s: type %s; want %s", tc.event.Reason, typ, tc.typ)
		}
		if action := tc.event.Action(); action != tc.action {
			t.Errorf("%s: action %s; want %s", tc.event.Reason, action, tc.action)
		}
		if note := tc.event.Note(); note != tc.note {
			t.Errorf("%s: note %q; want %q", tc.event.Reason, note, tc.note)
		}
	}
}

// TestAnswerMessages pins the words of the pods' EvacuationInitiated and of the progress the
// responder reports on an Eviction.
func TestAnswerMessages(t *testing.T) {
	for _, tc := range []struct {
		answer Answer
		want   string
	}{
		{Answer{}, ""},
		{Answer{Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge, Deployment: "web"}, "Deployment web surges a replacement before the pod is removed"},
		{Answer{Status: corev1.ConditionFalse, Reason: surgepolicy.ReasonSurgeTimedOut}, "the Deployment's surge did not become available in time: eviction moves the pod"},
		{Answer{Status: corev1.ConditionFalse, Reason: surgepolicy.ReasonPaused, PolicyMessage: "the Deployment is paused"}, "the Deployment is paused"},
	} {
		if got := tc.answer.Message(); got != tc.want {
			t.Errorf("%s %s: %q; want %q", tc.answer.Status, tc.answer.Reason, got, tc.want)
		}
	}
	if got, want := surgeProgressMessage("web", 5, 7), "Deployment web surged from 5 to 7 replicas: the pod goes once the replacements are available"; got != want {
		t.Errorf("surge progress: %q; want %q", got, want)
	}
	if got, want := removingMessage("web"), "Deployment web replaced the pod; it is being removed"; got != want {
		t.Errorf("removing: %q; want %q", got, want)
	}
}
