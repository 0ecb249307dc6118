// Package features holds nodemaint's feature gates (component-base), named as in KEP-4212.
package features

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/featuregate"
)

const (
	// DeclarativeNodeMaintenance enables the NodeMaintenance controller: cordon, evacuation requests,
	// drain and status.
	DeclarativeNodeMaintenance featuregate.Feature = "DeclarativeNodeMaintenance"

	// NodeMaintenanceDeployment enables the Deployment evacuation responder: Deployments with a
	// rolling update and maxSurge > 0 surge replacements before their pods leave a node.
	NodeMaintenanceDeployment featuregate.Feature = "NodeMaintenanceDeployment"
)

// Gate is the process-wide feature gate, set from --feature-gates.
var Gate featuregate.MutableFeatureGate = featuregate.NewFeatureGate()

// Both gates are Beta, on by default, as Kubernetes' gates are from Beta on: they are what
// nodemaint is for (the maintenance controllers, and moving Deployments without downtime), each
// covered by the whole of its tests; switching one off is the way out while a problem is fixed.
// Alpha gates, off by default, are for what comes next.
func init() {
	runtime.Must(Gate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		DeclarativeNodeMaintenance: {Default: true, PreRelease: featuregate.Beta},
		NodeMaintenanceDeployment:  {Default: true, PreRelease: featuregate.Beta},
	}))
}
