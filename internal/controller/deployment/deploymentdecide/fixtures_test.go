package deploymentdecide

import "github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/decidetest"

// The tests' objects, by their short names (see decidetest).
var (
	now                  = decidetest.Now
	newDeployment        = decidetest.NewDeployment
	withStatus           = decidetest.WithStatus
	withReplicas         = decidetest.WithReplicas
	withPaused           = decidetest.WithPaused
	withMinReady         = decidetest.WithMinReady
	withAnnotation       = decidetest.WithAnnotation
	withProgressDeadline = decidetest.WithProgressDeadline
	surging              = decidetest.Surging
	replicaSet           = decidetest.ReplicaSet
	pod                  = decidetest.Pod
	requested            = decidetest.Requested
	accepted             = decidetest.Accepted
	declined             = decidetest.Declined
	withMark             = decidetest.WithMark
	terminating          = decidetest.Terminating
	created              = decidetest.Created
	unschedulable        = decidetest.Unschedulable
	onNode               = decidetest.OnNode
	waiting              = decidetest.Waiting
	since                = decidetest.Since
	hpa                  = decidetest.HPA
	reporting            = decidetest.Reporting
)
