// Package observe reads from the cache what the controllers' decisions about a node need
// (nodedecide.Observation): the node's pods as their owners answered (through the evacuation
// protocol), the maintenances that select it, the DrainRules and the refusals met. The node and
// NodeMaintenance controllers both observe through it, and share the cache indexes it reads
// and the filters of the cache's events that matter to a node's decision.
package observe

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/permissions"
	"github.com/nodemaint/nodemaint/internal/requester"
)

// +kubebuilder:rbac:groups=nodemaint.dev,resources=drainrules,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Observer reads from the cache what the decision about a node needs (nodedecide.Observation).
// Both reconcilers observe through the one New builds: the node reconciler one node, the
// NodeMaintenance reconciler each node it selects.
type Observer struct {
	Client client.Reader
	// Pods is the cache's pod indexer, by node (PodsOnNode), and Nodes its node indexer
	// (SelectedNodes).
	Pods, Nodes toolscache.Indexer
	// OwnPods are nodemaint-controller's own pods, which are protected.
	OwnPods *OwnPods
	// Refusals remembers the refused evictions.
	Refusals *evictor.Refusals
	// Active is when this replica became the leader.
	Active *ActiveSince
	// Written are the pods' writes the cache may not show yet.
	Written *ownwrites.Writes[*corev1.Pod]
	// Protocol is how owners are asked to move their pods; it reads its objects into the pods'
	// answers.
	Protocol protocol.Protocol
	// PodDeletion tells whether the controller may delete pods (nil: it may).
	PodDeletion *permissions.PodDeletion
	// Clock tells the time: a reconcile reads it once and decides from that instant.
	Clock clock.PassiveClock
	// Reports are the node reconciler's last reports of each node, which the NodeMaintenance
	// reconciler's statuses are made of.
	Reports *Reports

	// selectors are the NodeMaintenances' parsed node selectors, aged by Clock.
	selectors *maintenance.Selectors
}

// Config is what New is given to build the Observer with: what the writes of the controllers
// share with it (Refusals, Written), what the install says (OwnPods, PodDeletion, Protocol), and
// the clock (nil: the real one).
type Config struct {
	Client      client.Reader
	OwnPods     *OwnPods
	Refusals    *evictor.Refusals
	Written     *ownwrites.Writes[*corev1.Pod]
	PodDeletion *permissions.PodDeletion
	Protocol    nodemaintv1alpha1.EvacuationProtocol
	Clock       clock.PassiveClock
}

// New builds the Observer the node and NodeMaintenance reconcilers share: the cache's indexers
// of pods and nodes, the protocol's stores and their indexes (under the EvictionRequest protocol
// only: the cache must not watch kinds the cluster may not serve), the leadership response
// timeouts count from, and the selectors' cache, all once.
func New(ctx context.Context, mgr manager.Manager, c Config) (*Observer, error) {
	o := &Observer{Client: c.Client, OwnPods: c.OwnPods, Refusals: c.Refusals, Written: c.Written, PodDeletion: c.PodDeletion,
		Active: &ActiveSince{}, Clock: c.Clock, Reports: NewReports()}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.selectors = maintenance.NewSelectors(selectorsKept, o.Clock)
	if err := o.Active.Start(mgr, o.Clock); err != nil {
		return nil, err
	}
	var err error
	if o.Pods, err = IndexerOf(mgr, &corev1.Pod{}); err != nil {
		return nil, err
	}
	if o.Nodes, err = IndexerOf(mgr, &corev1.Node{}); err != nil {
		return nil, err
	}
	var stores protocol.Stores
	if c.Protocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		if stores, err = ProtocolStores(mgr); err != nil {
			return nil, err
		}
		if err := protocol.SetupIndexes(ctx, mgr, stores); err != nil {
			return nil, err
		}
	}
	o.Protocol = protocol.For(c.Protocol, c.Client, stores)
	return o, nil
}

// selectorsKept is how long a parsed selector is kept after its last use.
const selectorsKept = 10 * time.Minute

// Now is the time a reconcile decides from.
func (o *Observer) Now() time.Time { return o.Clock.Now() }

// selectorOf is the NodeMaintenance's parsed node selector.
func (o *Observer) selectorOf(nm *nodemaintv1alpha1.NodeMaintenance) maintenance.Selector {
	if o.selectors == nil {
		return maintenance.NewSelector(nm)
	}
	return o.selectors.Of(nm)
}

// View is what the observations of one reconcile share, each read once: the NodeMaintenances,
// the DrainRules, and, when first needed, namespaces' labels and the VolumeAttachments. The
// NodeMaintenances and DrainRules are the cache's, not copies: read only (nodedecide.Decide does
// not change its observation).
type View struct {
	maintenances nodemaintv1alpha1.NodeMaintenanceList
	rules        *drain.Rules
	namespaces   map[string]map[string]string
	attachments  *storagev1.VolumeAttachmentList
}

// View reads what the observations of one reconcile share.
func (o *Observer) View(ctx context.Context) (*View, error) {
	v := &View{namespaces: map[string]map[string]string{}}
	if err := o.Client.List(ctx, &v.maintenances, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var rules nodemaintv1alpha1.DrainRuleList
	if err := o.Client.List(ctx, &rules, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	v.rules = drain.NewRules(rules.Items)
	return v, nil
}

// Observe reads everything the decision about the node needs. The pods are as the protocol's
// objects answer them (the EvictionRequests and Evictions of the EvictionRequest protocol), and
// the second result holds those objects, for the protocol's writes (nil: none).
func (o *Observer) Observe(ctx context.Context, v *View, node *corev1.Node) (nodedecide.Observation, *requester.Observed, error) {
	obs := nodedecide.Observation{Node: node, ActiveSince: o.Active.Since(), PodDeletionDenied: o.PodDeletion.Denied()}
	selecting := o.Selecting(v, node)
	// At most maintenance.MaxMaintenancesPerNode act on the node; the others wait, and neither
	// their label policy nor anything else of theirs changes what is done to it.
	obs.Admit(selecting)
	var err error
	if obs.Pods, err = PodsOnNode(o.Pods, node.Name); err != nil {
		return obs, nil, err
	}
	var seen *requester.Observed
	if obs.Pods, seen, err = o.Protocol.Observe(ctx, node.Name, obs.Pods); err != nil {
		return obs, nil, err
	}
	for i, pod := range obs.Pods {
		obs.Pods[i] = o.Written.Fresh(pod) // read only, as the cache's pods (PodsOnNode)
	}
	obs.IgnoreDrainLabel = maintenance.IgnoreDrainLabel(obs.Maintenances)
	scope := maintenance.NewPodScope(obs.Maintenances, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		return obs.Phases[nm.Name] // not drained: the plan is not known yet
	})
	if obs.Plan, err = o.plan(ctx, v, node, obs.Pods, scope); err != nil {
		return obs, nil, err
	}
	if obs.Plan.Pending() == 0 {
		if v.attachments == nil {
			v.attachments = &storagev1.VolumeAttachmentList{}
			if err := o.Client.List(ctx, v.attachments); err != nil {
				v.attachments = nil
				return obs, nil, err
			}
		}
		if obs.VolumesAttached, err = attachedVolumes(ctx, o.Client, node, obs.Pods, v.attachments.Items); err != nil {
			return obs, nil, err
		}
	}
	obs.Refusals = o.Refusals.Of(obs.Plan.Current)
	obs.Derive()
	return obs, seen, nil
}

// Selecting are the NodeMaintenances of the View whose nodeSelector selects the node.
func (o *Observer) Selecting(v *View, node *corev1.Node) []*nodemaintv1alpha1.NodeMaintenance {
	var selecting []*nodemaintv1alpha1.NodeMaintenance
	for i := range v.maintenances.Items {
		if o.selectorOf(&v.maintenances.Items[i]).Matches(node) {
			selecting = append(selecting, &v.maintenances.Items[i])
		}
	}
	return selecting
}

// plan classifies the targeted pods of a node by the DrainRules, within the scope of the
// maintenances acting on it: a pod none of those draining it selects (spec.podSelector) is
// skipped, and a pod's label nodemaint.dev/drain is ignored when one of those that select it
// ignores it (maintenance.PodScope).
func (o *Observer) plan(ctx context.Context, v *View, node *corev1.Node, pods []*corev1.Pod, scope maintenance.PodScope) (drain.Plan, error) {
	honoring, ignoring := v.rules.IgnoringDrainLabel(false), v.rules.IgnoringDrainLabel(true)
	// A stable order keeps the status (which names a few pods) from changing for nothing.
	sortByName(pods)
	classified := make([]drain.Classified, 0, len(pods))
	for _, pod := range pods {
		if !maintenance.Targeted(pod) {
			continue
		}
		class := drain.NotSelected()
		if selected, ignoreLabel := scope.Selects(pod); selected {
			nsLabels, err := o.namespaceLabels(ctx, v, pod.Namespace)
			if err != nil {
				return drain.Plan{}, err
			}
			rules := honoring
			if ignoreLabel {
				rules = ignoring
			}
			class = rules.Classify(pod, nsLabels, node.Labels)
		}
		if o.OwnPods.Match(pod) {
			class.Protected = "nodemaint-controller's own pod"
		}
		classified = append(classified, drain.Classified{Pod: pod, Class: class})
	}
	return drain.NewPlan(classified), nil
}

// namespaceLabels are the labels of the namespace, for the DrainRules' namespaceSelectors: read
// once per View (none for a namespace that is gone).
func (o *Observer) namespaceLabels(ctx context.Context, v *View, name string) (map[string]string, error) {
	if nsLabels, ok := v.namespaces[name]; ok {
		return nsLabels, nil
	}
	ns := &corev1.Namespace{}
	if err := o.Client.Get(ctx, types.NamespacedName{Name: name}, ns); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	v.namespaces[name] = ns.Labels
	return ns.Labels, nil
}

// sortByName sorts the pods by namespace and name.
func sortByName(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}
