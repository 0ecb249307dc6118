package invariants

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// The Machine checks (Options.ClusterAPI) judge nodemaint's part in the deletion of Cluster API
// Machines: the pre-drain hook nodemaintv1alpha1.ClusterAPIPreDrainHook, which nodemaint
// releases once the Machine's node is drained, and the NodeMaintenances it creates for Machines
// (annotated nodemaintv1alpha1.MachineAnnotation with the Machine's namespace/name). The Machines
// may be in another cluster than their nodes (Cluster API's management cluster): they are watched
// with ClusterAPI.Config, the nodes, pods and NodeMaintenances in the checker's own cluster, where
// the drain happens.
//
//   - [audit log of the Machines' cluster] every release of the hook by ControllerUser (a write of
//     the Machine whose body removes the hook) is judged settle after it completed: the Machine's
//     node (status.nodeRef) must then have been drained of every pod the drain of the Machine's
//     NodeMaintenance waits for (below), unless the Machine has no node, its node did not exist
//     in the checker's cluster, the node is not the Machine's (another spec.providerID), or the
//     Machine's NodeMaintenance was seen DrainTimedOut (the Machine's nodeDrainTimeoutSeconds ran
//     out) or being deleted (KindMachineHook). A pod counts as left on the node when it was bound
//     to it (or created on it) a second before the release was received and was still there
//     maintenanceSlack after: the watch of the pods lags the API server, and the controller
//     releases only once its NodeMaintenance, written after the pod went, says Drained.
//   - a NodeMaintenance of a Machine (its annotation) selects only the Machine's node: a node of
//     the same non-empty spec.providerID. One that selects another node has nodemaint cordon and
//     drain a node the Machine does not own, as a tenant who may create Machines could ask
//     (KindMachineNode). Judged settle after it was seen, with the Machines and nodes then known
//     (providerIDs are set once).
//   - CheckClean: no NodeMaintenance of a Machine that is gone is left, but one whose owner node
//     is gone too (the garbage collector's).
//
// The pods the drain of a Machine's NodeMaintenance waits for are those nodemaint targets (not
// of a DaemonSet, not mirror pods, not Succeeded or Failed; terminating ones too) that it does
// not skip: the maintenance selects every pod and honors the pod label nodemaint.dev/drain (skip
// skips, wait-completed waits); a pod that tolerates the unschedulable taint is skipped; else the
// first DrainRule by name that matches says. A pod whose rules the checker cannot evaluate counts
// as skipped, and so does a pod of a namespace the checker does not watch: no false alarm.

// Kinds of Violation of the Machine checks.
const (
	// KindMachineHook: nodemaint released its pre-drain hook while the Machine's node still had
	// a pod its drain waits for.
	KindMachineHook = "MachineHook"
	// KindMachineNode: a NodeMaintenance of a Machine selects a node that is not the Machine's.
	KindMachineNode = "MachineNode"
)

// actRelease: a write of nodemaint's that removed its pre-drain hook from a Machine.
const actRelease = "release the pre-drain hook"

// MachineGVR is Cluster API's Machine, the version nodemaint reads.
var MachineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}

// ClusterAPI configures the Machine checks (Options.ClusterAPI).
type ClusterAPI struct {
	// Config is the cluster of the Machines: Cluster API's management cluster. Nil: the
	// checker's own cluster (self-hosted), whose audit log (Options.AuditLog) must log the
	// Machines' writes too, as test/localcluster's does.
	Config *rest.Config
	// AuditLog is the path of the audit log of Config's API server, which must log the writes of
	// Machines with their bodies (MachineAuditPolicy). Without it, with Config, the releases of
	// the hook are not judged (the field managers do not say who removed an annotation).
	AuditLog string
}

// MachineAuditPolicy is an API server audit policy that logs what the Machine checks read of a
// cluster of Machines (ClusterAPI.AuditLog): the writes of Machines (not their status), with
// their bodies, and nothing else.
const MachineAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
omitManagedFields: true
rules:
- level: Request
  verbs: ["update", "patch"]
  resources:
  - group: "cluster.x-k8s.io"
    resources: ["machines"]
- level: None
`

// machineObject is what the checker reads of a Machine.
type machineObject struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ProviderID string `json:"providerID"`
	} `json:"spec"`
	Status struct {
		NodeRef struct {
			Name string `json:"name"`
		} `json:"nodeRef"`
	} `json:"status"`
}

// machineSeen is a Machine as last seen: hooked once it was seen with nodemaint's hook, goneAt
// once deleted.
type machineSeen struct {
	m      machineObject
	hooked bool
	goneAt time.Time
}

// capi is the state of the Machine checks; nil without Options.ClusterAPI.
type capi struct {
	machines map[string]*machineSeen
	// nodes are the nodes of the checker's cluster, and those gone lately with when.
	nodes     map[string]*corev1.Node
	nodesGone map[string]goneNode
	// timedOut, nmGone: when a NodeMaintenance of each Machine (namespace/name) was first seen
	// DrainTimedOut, or being deleted or gone.
	timedOut, nmGone map[string]time.Time
	// pending are the versions of Machines' NodeMaintenances still to judge (KindMachineNode);
	// flagged the NodeMaintenance UID and node pairs reported.
	pending []nmSeen
	flagged map[string]bool
	// releases counts the releases of the hook judged.
	releases int
}

type goneNode struct {
	node *corev1.Node
	at   time.Time
}

type nmSeen struct {
	nm   *nodemaintv1alpha1.NodeMaintenance
	seen time.Time
}

func newCAPI() *capi {
	return &capi{
		machines: map[string]*machineSeen{}, nodes: map[string]*corev1.Node{}, nodesGone: map[string]goneNode{},
		timedOut: map[string]time.Time{}, nmGone: map[string]time.Time{}, flagged: map[string]bool{},
	}
}

// machineInformer sets up the Machine checks: the Machines' client, the audit log of their
// cluster where it is another, and the informer of the Machines (one of the checker's own cluster
// takes part in its watch gaps; another cluster's does not).
func (c *Checker) machineInformer(opts Options) (cache.SharedIndexInformer, error) {
	if opts.AuditLog == "" {
		return nil, errors.New("invariant checker: the Machine checks need AuditLog")
	}
	capiOpts := opts.ClusterAPI
	c.state.capi = newCAPI()
	c.machines = c.dynamic
	discovery := c.client.Discovery()
	if capiOpts.Config != nil {
		config := rest.CopyConfig(capiOpts.Config)
		config.QPS, config.Burst = 100, 200
		var err error
		if c.machines, err = dynamic.NewForConfig(config); err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(config)
		if err != nil {
			return nil, err
		}
		discovery = cs.Discovery()
		if capiOpts.AuditLog != "" {
			c.machineAudit = &auditTail{path: capiOpts.AuditLog, machinesOnly: true}
		}
	}
	if _, err := discovery.ServerResourcesForGroupVersion(MachineGVR.GroupVersion().String()); err != nil {
		return nil, fmt.Errorf("invariant checker: the cluster of the Machines serves no %s: %w", MachineGVR.GroupVersion(), err)
	}
	lw := listWatch(c.machines.Resource(MachineGVR))
	if capiOpts.Config == nil {
		return c.informer(lw, &unstructured.Unstructured{}), nil
	}
	return cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{}), nil
}

// listMachines returns the Machines that exist (namespace/name), nil without Options.ClusterAPI.
func (c *Checker) listMachines(ctx context.Context) ([]string, error) {
	if c.machines == nil {
		return nil, nil
	}
	list, err := c.machines.Resource(MachineGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, key(m.GetNamespace(), m.GetName()))
	}
	return out, nil
}

// machine records a Machine the watch delivered.
func (s *state) machine(b []byte, deleted bool, now time.Time) {
	c := s.capi
	if c == nil {
		return
	}
	var m machineObject
	if json.Unmarshal(b, &m) != nil {
		return
	}
	k := key(m.Namespace, m.Name)
	prev := c.machines[k]
	seen := &machineSeen{m: m, hooked: hasHook(m.Annotations)}
	if prev != nil && prev.m.UID == m.UID {
		seen.hooked = seen.hooked || prev.hooked
	}
	if deleted {
		seen.goneAt = now
	}
	c.machines[k] = seen
	for k, g := range c.machines {
		if !g.goneAt.IsZero() && now.Sub(g.goneAt) > goneRetention {
			delete(c.machines, k)
		}
	}
}

func hasHook(annotations map[string]string) bool {
	_, ok := annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]
	return ok
}

// capiNode records a node of the checker's cluster for the Machine checks.
func (s *state) capiNode(node *corev1.Node, deleted bool, now time.Time) {
	c := s.capi
	if c == nil {
		return
	}
	if deleted {
		delete(c.nodes, node.Name)
		c.nodesGone[node.Name] = goneNode{node: node, at: now}
		return
	}
	c.nodes[node.Name] = node
	for name, g := range c.nodesGone {
		if now.Sub(g.at) > goneRetention {
			delete(c.nodesGone, name)
		}
	}
}

// machineMaintenance records a version of a NodeMaintenance for the Machine checks: what it says
// of its Machine's drain, and, when it is a Machine's and not being deleted, its nodes to judge.
func (s *state) machineMaintenance(nm *nodemaintv1alpha1.NodeMaintenance, deleted bool, now time.Time) {
	c := s.capi
	k := nm.Annotations[nodemaintv1alpha1.MachineAnnotation]
	if c == nil || k == "" {
		return
	}
	if _, ok := c.timedOut[k]; !ok && !deleted && meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) {
		c.timedOut[k] = now
	}
	if deleted || nm.DeletionTimestamp != nil {
		if _, ok := c.nmGone[k]; !ok {
			c.nmGone[k] = now
		}
		return
	}
	c.pending = append(c.pending, nmSeen{nm: nm, seen: now})
}

// judgeMachineNodes judges the Machines' NodeMaintenances seen settle before now: each selects
// only nodes of its Machine's providerID (KindMachineNode). One whose Machine the checker has not
// seen waits for it, a minute at most.
func (s *state) judgeMachineNodes(now time.Time) {
	c := s.capi
	if c == nil {
		return
	}
	n := 0
	for _, p := range c.pending {
		if p.seen.After(now.Add(-settle)) {
			c.pending[n] = p
			n++
			continue
		}
		k := p.nm.Annotations[nodemaintv1alpha1.MachineAnnotation]
		m := c.machines[k]
		if m == nil {
			if now.Sub(p.seen) < time.Minute {
				c.pending[n] = p
				n++
			}
			continue
		}
		sel, err := nodeaffinity.NewNodeSelector(&p.nm.Spec.NodeSelector)
		if err != nil {
			continue
		}
		nodes := make([]*corev1.Node, 0, len(c.nodes))
		for _, name := range sortedKeysOf(c.nodes) {
			nodes = append(nodes, c.nodes[name])
		}
		for _, name := range sortedKeysOf(c.nodesGone) {
			nodes = append(nodes, c.nodesGone[name].node)
		}
		for _, node := range nodes {
			flag := string(p.nm.UID) + "/" + node.Name
			if !sel.Match(node) || c.flagged[flag] || ownedBy(m.m, node) {
				continue
			}
			c.flagged[flag] = true
			s.record(Violation{Time: p.seen, Kind: KindMachineNode, Object: "Machine/" + k,
				Detail: fmt.Sprintf("NodeMaintenance %s of the Machine selects node %s, whose spec.providerID %q is not the Machine's %q: nodemaint cordons and drains a node the Machine does not own",
					p.nm.Name, node.Name, node.Spec.ProviderID, m.m.Spec.ProviderID)})
		}
	}
	c.pending = c.pending[:n]
}

// ownedBy: the node is the Machine's, the same non-empty spec.providerID.
func ownedBy(m machineObject, node *corev1.Node) bool {
	return m.Spec.ProviderID != "" && node.Spec.ProviderID == m.Spec.ProviderID
}

// machineWriteOf reports whether the audit entry is a write of a Machine (not its status).
func machineWriteOf(e *auditEvent) bool {
	ref := e.ObjectRef
	return ref.APIGroup == MachineGVR.Group && ref.Resource == MachineGVR.Resource && ref.Subresource == "" &&
		(e.Verb == "update" || e.Verb == "patch")
}

// releasesHookIn reports whether a Machine's write removes nodemaint's pre-drain hook: a merge
// patch that sets it, or all the annotations, to null (client.MergeFrom of a Machine whose only
// annotation was the hook), a JSON patch that removes it, or an update or apply whose body
// lacks it.
func releasesHookIn(verb string, body json.RawMessage) bool {
	var v any
	if len(body) == 0 || json.Unmarshal(body, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case []any:
		path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(nodemaintv1alpha1.ClusterAPIPreDrainHook, "~", "~0"), "/", "~1")
		return slices.ContainsFunc(v, func(op any) bool {
			o, _ := op.(map[string]any)
			return o != nil && o["op"] == "remove" && o["path"] == path
		})
	case map[string]any:
		md, _ := v["metadata"].(map[string]any)
		raw, mentioned := md["annotations"]
		annotations, _ := raw.(map[string]any)
		hook, has := annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]
		if verb == "update" || v["kind"] == "Machine" {
			// The whole object: the hook is released when it is not in it.
			return !has
		}
		// A merge patch: the hook set to null, or every annotation (the hook the only one).
		return has && hook == nil || mentioned && raw == nil
	}
	return false
}

// judgeRelease judges a release of the hook (see the comment at the top).
func (s *state) judgeRelease(r record) {
	c, a := s.capi, s.acts
	m := c.machines[r.machine]
	if r.received.Before(a.from) || m == nil || !m.hooked {
		return
	}
	a.judged++
	c.releases++
	why := s.releaseEarly(r.machine, m.m, r.received)
	if why == "" {
		return
	}
	s.record(Violation{Time: r.received, Kind: KindMachineHook, Object: "Machine/" + r.machine,
		Detail: fmt.Sprintf("nodemaint released the pre-drain hook (audit %s) while %s", r.id, why)})
}

// releaseEarly returns "" when nodemaint could release the Machine's hook at, else what was left
// on its node.
func (s *state) releaseEarly(k string, m machineObject, at time.Time) string {
	c := s.capi
	nodeName := m.Status.NodeRef.Name
	if nodeName == "" {
		return ""
	}
	node := c.nodeAt(nodeName, at)
	if node == nil || !ownedBy(m, node) {
		return "" // no node of the Machine's: Cluster API skips the drain; nodemaint drains none
	}
	for _, t := range []map[string]time.Time{c.timedOut, c.nmGone} {
		if seen, ok := t[k]; ok && !seen.After(at.Add(maintenanceSlack)) {
			return ""
		}
	}
	left := s.podsLeftAt(node, at)
	if len(left) == 0 {
		return ""
	}
	return fmt.Sprintf("node %s (the Machine's, spec.providerID %q) still had %d pods its drain waits for: %s",
		nodeName, node.Spec.ProviderID, len(left), strings.Join(left[:min(len(left), 5)], ", "))
}

// nodeAt returns the node of the name that certainly existed at t: created a second before it,
// and there now or gone maintenanceSlack after it. Nil when it may not have.
func (c *capi) nodeAt(name string, t time.Time) *corev1.Node {
	before := func(n *corev1.Node) bool { return !n.CreationTimestamp.Add(time.Second).After(t) }
	if n := c.nodes[name]; n != nil && before(n) {
		return n
	}
	if g, ok := c.nodesGone[name]; ok && g.at.After(t.Add(maintenanceSlack)) && before(g.node) {
		return g.node
	}
	return nil
}

// podsLeftAt returns the pods (namespace/name) the drain of a Machine's NodeMaintenance waits for
// that were certainly on the node at t: bound to it a second before, and there now or gone
// maintenanceSlack after t.
func (s *state) podsLeftAt(node *corev1.Node, t time.Time) []string {
	onNode := func(p *corev1.Pod) bool {
		return p.Spec.NodeName == node.Name && !boundAt(p).Add(time.Second).After(t) && s.machineDrainWaitsFor(p, node)
	}
	seen := map[string]bool{}
	var left []string
	for _, k := range sortedKeysOf(s.pods) {
		if p := s.pods[k]; onNode(p) {
			seen[string(p.UID)] = true
			left = append(left, k)
		}
	}
	if s.acts != nil {
		for _, k := range sortedKeysOf(s.acts.gone) {
			for _, g := range s.acts.gone[k] {
				if g.at.After(t.Add(maintenanceSlack)) && !seen[string(g.pod.UID)] && onNode(g.pod) {
					seen[string(g.pod.UID)] = true
					left = append(left, k+" (gone since)")
				}
			}
		}
	}
	return left
}

// boundAt is when the pod was bound to its node: its PodScheduled condition's time, else its
// creation (a pod created with its node).
func boundAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

// machineDrainWaitsFor reports whether the drain of a Machine's NodeMaintenance (every pod,
// drainLabelPolicy Honor) certainly waits for the pod: one nodemaint targets that it does not
// skip (see the comment at the top).
func (s *state) machineDrainWaitsFor(pod *corev1.Pod, node *corev1.Node) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	switch pod.Labels[nodemaintv1alpha1.DrainLabel] {
	case nodemaintv1alpha1.DrainLabelSkip:
		return false
	case nodemaintv1alpha1.DrainLabelWaitCompleted:
		return true
	}
	unschedulable := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), unschedulable, false) {
			return false
		}
	}
	if s.acts == nil {
		return true
	}
	for _, name := range sortedKeysOf(s.acts.rules) {
		match, known := s.ruleMatches(s.acts.rules[name], pod, node)
		if !known {
			return false
		}
		if match {
			return s.acts.rules[name].Spec.Drain.Behavior != nodemaintv1alpha1.DrainBehaviorSkip
		}
	}
	return true
}

// MachineReleases returns the releases of nodemaint's pre-drain hook the checker judged: a test
// can assert that it judged one. Zero without Options.ClusterAPI.
func (c *Checker) MachineReleases() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.capi == nil {
		return 0
	}
	return c.state.capi.releases
}

// machineLeftovers returns a line per NodeMaintenance of a Machine that is gone (not in
// machines, namespace/name), unless its owner node is gone too: the garbage collector's.
func machineLeftovers(snap Snapshot) []string {
	if snap.Machines == nil {
		return nil
	}
	machines, nodes := map[string]bool{}, map[string]bool{}
	for _, m := range snap.Machines {
		machines[m] = true
	}
	for i := range snap.Nodes {
		nodes[snap.Nodes[i].Name] = true
	}
	var out []string
	for _, nm := range snap.NodeMaintenances {
		k := nm.Annotations[nodemaintv1alpha1.MachineAnnotation]
		if k == "" || machines[k] || nm.DeletionTimestamp != nil {
			continue
		}
		collected := slices.ContainsFunc(nm.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.Kind == "Node" && o.APIVersion == "v1" && !nodes[o.Name]
		})
		if !collected {
			out = append(out, fmt.Sprintf("NodeMaintenance %s: of Machine %s, which is gone", nm.Name, k))
		}
	}
	return out
}
