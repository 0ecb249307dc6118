package nodedecide

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Observation is everything a node's decision is made from, read from the cluster at one moment.
// What is derived from the node and its maintenances is derived once, here (Admit, then Derive
// once the plan and volumes are known), and the decision reads it: Decide parses no annotation
// and computes no phase.
type Observation struct {
	// Node is the node as read.
	Node *corev1.Node
	// Entries are the node's annotation nodemaint.dev/maintenances, parsed
	// (maintenance.NodeEntries), and DrainStarts its annotation nodemaint.dev/drain-started
	// (maintenance.ParseDrainStarts): set by Admit.
	Entries     []maintenance.NodeEntry
	DrainStarts map[string]maintenance.DrainStart
	// Maintenances are the NodeMaintenances whose nodeSelector selects the node and that act on
	// it (Admit): at most maintenance.MaxMaintenancesPerNode of them ask something of it.
	Maintenances []*nodemaintv1alpha1.NodeMaintenance
	// Beyond are the NodeMaintenances that select the node but do not act on it, past the bound,
	// in the order they will act (Admit).
	Beyond []*nodemaintv1alpha1.NodeMaintenance
	// Phases are the phases on the node of the maintenances acting on it (rollout.Phase), by
	// name: as if the node were not drained after Admit (what scopes the pods the plan
	// classifies), and with the plan and volumes observed after Derive (what the decision reads).
	Phases map[string]nodemaintv1alpha1.Phase
	// Pods are the pods bound to the node, read only: they are the cache's own (see Decide).
	Pods []*corev1.Pod
	// Requests are the pods' evacuation requests (their condition EvacuationRequest, whoever
	// asked), by UID: set by Derive.
	Requests map[types.UID]*corev1.PodCondition
	// Plan classifies the node's targeted pods by the DrainRules, within the maintenances' scope
	// (maintenance.PodScope): a pod no maintenance draining the node selects by its podSelector
	// is skipped (drain.NotSelected).
	Plan drain.Plan
	// IgnoreDrainLabel says the Plan may have been classified with the pod label
	// nodemaint.dev/drain ignored (maintenance.IgnoreDrainLabel: a maintenance draining the node
	// ignores it; the pods that one selects were). Requests follow the plan; evictions and
	// deletions follow each maintenance's own podSelector and label policy (drainer.drains).
	IgnoreDrainLabel bool
	// VolumesAttached counts the volumes of drained pods still attached to the node. It is only
	// counted once the plan has no pod pending, and zero before.
	VolumesAttached int
	// ActiveSince is when this controller replica became the leader (zero: unknown): response
	// timeouts count from then at the earliest (see drain.Policy.CountFrom).
	ActiveSince time.Time
	// Refusals are the refused evictions of the plan's current pods, by UID.
	Refusals map[types.UID]drain.Refusal
	// drainers are the maintenances of Phases that drain the node, with what the decision reads
	// of each for every pod of the plan's current order group: set by Derive.
	drainers []drainer
	// PodDeletionDenied: the controller may not delete pods (the install did not grant it, see
	// permissions.PodDeletion), so drainTimeoutAction Delete deletes nothing; its pods are left
	// to the evictions, as with Report.
	PodDeletionDenied bool
}

// Decision is what nodemaint does to one node and its pods now, and what it reports of them.
type Decision struct {
	// Intent is what the maintenances selecting the node want of it, together.
	Intent maintenance.NodeIntent

	// Node is the node as nodemaint wants it: spec.unschedulable, its taints, nodemaint's
	// annotations and the UnderMaintenance condition; everything else as observed. It is the
	// observed node itself when nothing is to change.
	Node *corev1.Node
	// NodeChanged and ConditionChanged say whether Node differs from the observed node in spec
	// or annotations, and in its conditions.
	NodeChanged, ConditionChanged bool
	// Change says what changing the node means, for its Events.
	Change NodeChange
	// ShutdownNotConfirmed: the out-of-service taint is due but for the evidence that the node
	// was shut down (see shutdownEvidence).
	ShutdownNotConfirmed bool

	// Withdraw are the pods whose evacuation request by nodemaint is withdrawn: before the node is
	// written, so that its annotation stops naming a maintenance only once its requests are gone.
	Withdraw []*corev1.Pod
	// Request are the pods that get nodemaint's evacuation request (RequestReason its message).
	// Request, Delete and Evict are for once the node is cordoned: none is acted on before.
	Request       []*corev1.Pod
	RequestReason string
	// Asked are the pods that carry nodemaint's evacuation request once the decision is
	// written: Request, and the pods asked before and still asked.
	Asked []*corev1.Pod
	// SignalOnly are the pods of Asked, by UID, that nodemaint never evicts or deletes: no
	// maintenance draining the node that evicts (neither SignalOnly nor unusable) drains the pod
	// by its own podSelector, label policy and DrainRules, or the pod is protected. Every
	// protocol asks these through the EvacuationRequest pod condition alone: an EvictionRequest
	// asks for an eviction, which whatever Eviction controller runs carries out (the in-tree
	// one, another installation's, or the imperative evictor of any of them), without the
	// response timeout or the grace period, where no maintenance wants one at all. The other
	// pods of Asked are evicted by some maintenance once their owners do not answer, so under
	// the EvictionRequest protocol they may be asked through an EvictionRequest.
	SignalOnly map[types.UID]bool
	// Delete are the pods deleted now, bypassing PodDisruptionBudgets: each for a maintenance
	// that asked for drainTimeoutAction Delete, whose drain on this node ran drainTimeout, whose
	// own classification drains the pod, and which asked the pod its response timeout ago.
	Delete []drain.Classified
	// Evict are the pods evicted now, through the Eviction API.
	Evict []drain.Classified
	// GracePeriods are the grace periods, in seconds, of the evictions and deletions of Evict
	// and Delete that the maintenances they are for shorten or lengthen
	// (spec.evictionGracePeriodSeconds), by pod UID: the shortest of theirs, a maintenance that
	// sets none counting as the pod's own terminationGracePeriodSeconds. A pod it does not name
	// gets its own. Every protocol's eviction and deletion carries it (DeleteOptions).
	GracePeriods map[types.UID]int64

	// Holds are the pods the drain waits on for their application's owner (a budget refuses
	// their eviction, or the owner has not answered for UnansweredAfter), at most MaxHolds: the
	// Events for application owners are made of them (AppOwnerEvents).
	Holds []Hold

	// Report is what the node's status says.
	Report Report

	// RecheckAfter is when the decision may change by itself (a response timeout, a back-off,
	// the out-of-service grace period or the drain timeout runs out); zero: only on a change.
	RecheckAfter time.Duration
}

// NodeChange is what a node write does, for its Events.
type NodeChange struct {
	// Cordoned: the node is cordoned; Reverted: again, someone uncordoned it during a maintenance
	// that cordons it.
	Cordoned, Reverted bool
	// Uncordoned: no maintenance cordons it any more, and nodemaint lifts its cordon.
	Uncordoned bool
	// OutOfService: the out-of-service taint is applied; BackInService: nodemaint's is removed.
	OutOfService, BackInService bool
}

// Report is what a node's entry in a NodeMaintenance's status says.
type Report struct {
	// Pending counts the pods the drain still waits for; Evacuating those of them their owners
	// accepted to move; Skipped the targeted pods left running.
	Pending, Evacuating, Skipped int
	// VolumesAttached counts volumes of drained pods still attached (see Observation).
	VolumesAttached int
	// OutOfService: the node carries nodemaint's out-of-service taint.
	OutOfService bool
	// RemovedBy names the autoscaler already removing the node (see RemovedBy), or "".
	RemovedBy string
	// Blocked says what holds the pods that stay: all of them while the node is drained, else
	// those that are not drained in any case (later order groups, skipped, waited for, held).
	Blocked []nodemaintv1alpha1.BlockedPods
	// Beyond names the maintenances that select the node but do not act on it, past
	// maintenance.MaxMaintenancesPerNode (Observation.Beyond).
	Beyond []string
	// Left names a few pods the drain still waits for (drain.MaxBlockedNames), and SkippedNames
	// a few skipped ones with what skipped them (MaxSkippedNames), for the conditions' messages.
	Left, SkippedNames []string
}

// MaxSkippedNames is how many skipped pods a Report names.
const MaxSkippedNames = 5

// Admit reads the observed node's annotations once (Entries, DrainStarts) and splits the
// NodeMaintenances selecting it into those that act on it (Maintenances) and those past
// maintenance.MaxMaintenancesPerNode (added to Beyond; maintenance.Admit): the maintenances its
// annotation names keep their place, then the oldest. A maintenance whose phase on the node
// (rollout.Phase) is MaintenanceComplete takes no place. It keeps the acting ones' phases, as if
// the node were not drained (Phases). The observation's maintenances are admitted before its
// pods are classified: a maintenance past the bound does not change how they are drained.
func (obs *Observation) Admit(selecting []*nodemaintv1alpha1.NodeMaintenance) {
	node := obs.Node
	obs.Entries = maintenance.NodeEntries(node)
	obs.DrainStarts = maintenance.ParseDrainStarts(node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])
	phases := make(map[string]nodemaintv1alpha1.Phase, len(selecting))
	acting, beyond := maintenance.Admit(selecting, obs.Entries, func(nm *nodemaintv1alpha1.NodeMaintenance) bool {
		phases[nm.Name] = rollout.Phase(nm, node, obs.Entries, false)
		return phases[nm.Name] != nodemaintv1alpha1.PhaseMaintenanceComplete
	})
	for _, nm := range beyond {
		delete(phases, nm.Name)
	}
	obs.Maintenances, obs.Beyond, obs.Phases = acting, append(slices.Clip(obs.Beyond), beyond...), phases
}

// Derive completes the observation once its pods, plan and volumes are known: the pods'
// evacuation requests (Requests); the acting maintenances' phases on the node, drained meaning
// that the plan has no pod pending and no volume of a drained pod is attached (rollout.Phase: a
// drain is complete, a turn released; the phases Admit kept while it is not); and those of them
// that drain it, each with what the decision reads of it for every pod (drainer).
func (obs *Observation) Derive() {
	obs.Requests = make(map[types.UID]*corev1.PodCondition, len(obs.Pods))
	for _, pod := range obs.Pods {
		if req := evacuation.Condition(pod, evacuation.Request); req != nil {
			obs.Requests[pod.UID] = req
		}
	}
	if obs.Plan.Pending() == 0 && obs.VolumesAttached == 0 {
		phases := make(map[string]nodemaintv1alpha1.Phase, len(obs.Maintenances))
		for _, nm := range obs.Maintenances {
			phases[nm.Name] = rollout.Phase(nm, obs.Node, obs.Entries, true)
		}
		obs.Phases = phases
	}
	obs.drainers = nil
	for _, nm := range obs.Maintenances {
		if maintenance.Drains(obs.Phases[nm.Name]) {
			obs.drainers = append(obs.drainers, newDrainer(nm, obs.Plan.Current, obs.IgnoreDrainLabel))
		}
	}
}
