// Package progress shows where a NodeMaintenance stands: one summary line, a table of its nodes
// (for a rollout, of the nodes in their turn, since when and what holds each), what blocks each
// node and why, and how a rollout rolls; and Follow, which watches a maintenance until it is
// drained, redrawing the table on a terminal or printing a line per change otherwise. The
// status, list and drain commands print with it.
package progress
