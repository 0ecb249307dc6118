// Package testutil holds what integration and end-to-end tests read back from the cluster to
// compare with what they expect: compact views of a node, a pod's evacuation request and a
// NodeMaintenance's status; and the real API server an integration test starts.
package testutil
