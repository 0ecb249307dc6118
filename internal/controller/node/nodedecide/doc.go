// Package nodedecide decides what nodemaint does to one node and its pods at one moment: from an
// Observation of the cluster (the node, the NodeMaintenances selecting it, its pods classified by
// the DrainRules, its attached volumes, the refused evictions) and the time, Decide returns the
// node as nodemaint wants it (cordon, taints, annotations, the UnderMaintenance condition), the
// evacuation requests to set and withdraw, the pods to evict or delete now, what holds the pods
// that stay (and the holds to tell their application owners of, AppOwnerEvents), and when to
// look again. It is pure: it reads no cluster and writes nothing; the node
// reconciler applies a Decision, and the NodeMaintenance reconciler reports it.
package nodedecide
