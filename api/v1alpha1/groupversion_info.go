// Package v1alpha1 contains the nodemaint.dev/v1alpha1 API: NodeMaintenance (KEP-4212's declarative
// node maintenance) and DrainRule (Cluster API's MachineDrainRule, applied to nodes).
//
// +kubebuilder:object:generate=true
// +groupName=nodemaint.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nodemaint.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
