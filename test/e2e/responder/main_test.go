// Package responder_test proves the Deployment evacuation responder end to end: on the local
// cluster with the real Deployment and ReplicaSet controllers, disruption controller and
// scheduler, kwok kubelets with start-up delays, and the NodeMaintenance controller setting the
// evacuation requests. Availability is asserted from watches of the pods and the Deployment.
package responder_test

import (
	"os"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 5})) }
