package framework

import (
	"slices"
	"testing"
)

// Protocol is how nodemaint asks a pod's responders to evacuate it on the test's cluster.
type Protocol string

const (
	// PodConditions: the cluster does not serve KEP-4563's EvictionRequest API; nodemaint asks
	// through the pods' conditions.
	PodConditions Protocol = "pod conditions"
	// EvictionRequests: the cluster serves lifecycle.k8s.io/v1alpha1 ($EVICTION_REQUEST_API=true,
	// or Options.EvictionRequestAPI); nodemaint asks through EvictionRequests.
	EvictionRequests Protocol = "EvictionRequests"
)

// ClusterProtocol is the protocol the shared cluster speaks.
func ClusterProtocol() Protocol {
	if cluster != nil && cluster.EvictionRequestAPI() {
		return EvictionRequests
	}
	return PodConditions
}

// RequireProtocols skips the test unless the cluster speaks one of protocols: the protocols
// under which what the test proves holds, and is worth its time. It is the test's first line.
// make test-e2e runs the drain's and the responder's packages a second time, whole, on clusters
// serving the EvictionRequest API: a test runs there if it names EvictionRequests, or if it does
// not call RequireProtocols at all (a test is never left out by omission).
func RequireProtocols(t testing.TB, protocols ...Protocol) {
	t.Helper()
	switch p := ClusterProtocol(); {
	case slices.Contains(protocols, p):
	case p == PodConditions:
		t.Skip("the cluster does not serve lifecycle.k8s.io/v1alpha1: run with EVICTION_REQUEST_API=true")
	default:
		t.Skipf("runs where nodemaint speaks %q; this cluster serves the EvictionRequest API", protocols)
	}
}
