// Package deploymentdecide is the decision of nodemaint's Deployment evacuation responder, pure: from what
// the responder observed of one Deployment (Input: the Deployment, its ReplicaSets, their pods as
// internal/responder shows them, whether an autoscaler targets it, the time), what it
// does now (Decision): the pods' answers (EvacuationInitiated accepted, declined or withdrawn), the
// pods marked to go first or unmarked (their deletion cost), and the Deployment's scale and surge
// record: a wave that starts, grows, completes, is rolled back or gives up. It also decides the
// ReplicaSets' markers and the Deployment's count of pods to evacuate (Markers, CountCanWait),
// and what the responder reports on the Evictions it accepted (SurgeWave, SurgeProgress,
// Removing). Whether a Deployment surges at all, and by how much, is
// internal/responder/surgepolicy's. The plan carries its Events and answers as reasons and
// facts; messages.go words them.
//
// The decision is level-based and fuzzed (FuzzDecide): taken again after its plan is carried
// out, at any point, it converges. It does no I/O: internal/controller/deployment observes and
// applies it.
package deploymentdecide
