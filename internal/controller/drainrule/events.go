package drainrule

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/eventsink"
)

// ruleValidated: a DrainRule's Valid condition was written; a Warning when it became (or stays,
// with another message) invalid.
func ruleValidated(recorder events.EventRecorder, old, cur *nodemaintv1alpha1.DrainRule) {
	was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionValid)
	if c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionValid); c != nil && c.Status == metav1.ConditionFalse &&
		(was == nil || was.Status != c.Status || was.Message != c.Message) {
		eventsink.Sink{EventRecorder: recorder}.Warning(cur, nil, nodemaintv1alpha1.ReasonInvalidSelector, "Validate", c.Message)
	}
}
