// Package v1alpha1 contains the nodemaint.dev/v1alpha1 API: NodeMaintenance (KEP-4212's declarative
// node maintenance) and DrainRule (Cluster API's MachineDrainRule, applied to nodes).
//
// +kubebuilder:object:generate=true
// +groupName=nodemaint.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nodemaint.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	// (apimachinery's, as Kubernetes' own API packages: controller-runtime's scheme.Builder is
	// deprecated, it would pull controller-runtime into every importer of the API).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every type of this package, and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&NodeMaintenance{}, &NodeMaintenanceList{},
		&DrainRule{}, &DrainRuleList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
