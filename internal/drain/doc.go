// Package drain decides how the pods of a node under maintenance are drained: which DrainRule
// applies to a pod, which pods are drained now (order groups), and which are skipped or waited for.
// It does no I/O.
package drain
