// Package phase holds `kubectl maintenance plan`, `cordon` and `drain`: each creates the
// NodeMaintenance of the nodes, or updates the one that exists, with the phase the verb names
// (cordon, drain), and drain follows it until the nodes are drained. Here too are drain's
// rollout flags (spec.rollout), the kubectl drain flags it takes, kubectl's --dry-run of the three
// (drain's: the preflight, then the object), and the classic drain that drain falls back to on a
// cluster without nodemaint when --classic-fallback asks for it.
package phase
