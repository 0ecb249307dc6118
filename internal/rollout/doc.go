// Package rollout decides which selected nodes of a NodeMaintenance with spec.rollout have their
// turn: at most maxUnavailable at once, in a deterministic order, inside the maintenance window,
// none new while the rollout is halted; and, for one node, what its turn means for the node
// reconciler (waiting in Planning, in its turn, released). It is pure: the NodeMaintenance
// reconciler observes the nodes and writes the turns to status.rollout.inTurn, the node
// reconciler reads them from there and records a released node in its annotation.
package rollout
