// Package complete holds `kubectl maintenance complete` and its alias `uncordon`: each ends a
// NodeMaintenance (deletes the one the plugin created, or sets its cordon and drain back to
// false), or, for named nodes in their turn in a rollout with release Manual, ends their turn
// through the node annotation nodemaint.dev/complete.
package complete
