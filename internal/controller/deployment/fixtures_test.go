package deployment

import "github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/decidetest"

// The tests' objects, by their short names (see decidetest), as in the decision's tests.
var (
	now            = decidetest.Now
	newDeployment  = decidetest.NewDeployment
	withAnnotation = decidetest.WithAnnotation
	surging        = decidetest.Surging
	replicaSet     = decidetest.ReplicaSet
	pod            = decidetest.Pod
	requested      = decidetest.Requested
	accepted       = decidetest.Accepted
	withMark       = decidetest.WithMark
	created        = decidetest.Created
	onNode         = decidetest.OnNode
)
