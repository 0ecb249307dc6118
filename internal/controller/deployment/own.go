package deployment

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/responder"
)

// ownWrites gives apply its own copies of the pods the plan writes (the answers, the marks and
// unmarks), which it changes as it writes them: observe reads the cache's pods, not copies. A
// pod the plan writes twice (answered, then marked) is one copy, so that the second write
// starts from what the first returned. Through view, an answer on the pod's conditions changes
// the copy too.
func ownWrites(p *deploymentdecide.Decision, view responder.View) {
	copies := map[*corev1.Pod]*corev1.Pod{}
	own := func(pod *corev1.Pod) *corev1.Pod {
		c, ok := copies[pod]
		if !ok {
			c = view.Own(pod)
			copies[pod] = c
		}
		return c
	}
	for i := range p.Answers {
		p.Answers[i].Pod = own(p.Answers[i].Pod)
	}
	for _, pods := range [][]*corev1.Pod{p.Mark, p.Unmark} {
		for i := range pods {
			pods[i] = own(pods[i])
		}
	}
}
