package localcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const (
	// NodeNamePrefix starts the name of every fake node: kwok-node-0, kwok-node-1, ...
	NodeNamePrefix = "kwok-node-"
	// NodeTypeLabel is on every fake node, with the value "kwok".
	NodeTypeLabel = "type"

	// KwokNodeLabel, with the value "fake", is how kwok selects the nodes it plays the kubelet
	// for. StopKubelet and StartKubelet remove and restore it. It is a label and not kwok's
	// usual annotation because kwok only notices that a node left its selection when the API
	// server filters its watch, which it does for labels only.
	KwokNodeLabel = "kwok.x-k8s.io/node"

	// NodeStatusHeldAnnotation is on a node whose status kwok leaves alone: HoldNodeStatus
	// sets it, ReleaseNodeStatus removes it.
	NodeStatusHeldAnnotation = "localcluster.nodemaint.io/node-status-held"

	// nodeCreateWorkers bounds the parallel node creations.
	nodeCreateWorkers = 32
	// nodesReadyTimeout bounds the wait for new nodes to become Ready, and 50ms more per node.
	nodesReadyTimeout = 3 * time.Minute
)

// Zones are the values of the topology.kubernetes.io/zone label; node i is in Zones[i%3].
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// newNode returns the fake node number i: a 32-CPU, 256Gi Linux node, without taints.
func newNode(i int) *corev1.Node {
	name := NodeNamePrefix + strconv.Itoa(i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				NodeTypeLabel:            "kwok",
				KwokNodeLabel:            "fake",
				corev1.LabelHostname:     name,
				corev1.LabelOSStable:     "linux",
				corev1.LabelArchStable:   "amd64",
				corev1.LabelTopologyZone: Zones[i%len(Zones)],
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// ensureNodes creates the nodes numbered 0 to n-1 that do not exist and waits until they
// are all Ready.
func (c *Cluster) ensureNodes(ctx context.Context, n int) error {
	indexes := make([]int, n)
	for i := range indexes {
		indexes[i] = i
	}
	_, err := c.createNodes(ctx, indexes)
	return err
}

// NodeOption adjusts a fake node before AddNodes creates it.
type NodeOption func(*corev1.Node)

// WithLabels adds labels to the new nodes, e.g. to make them a node pool of their own.
func WithLabels(labels map[string]string) NodeOption {
	return func(node *corev1.Node) {
		for k, v := range labels {
			node.Labels[k] = v
		}
	}
}

// AddNodes creates n more nodes, numbered after the highest-numbered node, adjusted by opts,
// waits until they are Ready and returns their names.
func (c *Cluster) AddNodes(ctx context.Context, n int, opts ...NodeOption) ([]string, error) {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeTypeLabel + "=kwok"})
	if err != nil {
		return nil, err
	}
	next := 0
	for _, node := range nodes.Items {
		if i, err := strconv.Atoi(strings.TrimPrefix(node.Name, NodeNamePrefix)); err == nil && i >= next {
			next = i + 1
		}
	}
	indexes := make([]int, n)
	for i := range indexes {
		indexes[i] = next + i
	}
	return c.createNodes(ctx, indexes, opts...)
}

// DeleteNode deletes a node. The garbage collector deletes its Lease, and the pod garbage
// collector its pods (after its 40s quarantine).
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	return c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
}

// StopKubelet stops the fake kubelet of one node, as if the node was shut down: kwok stops
// renewing the node's Lease and updating its status and its pods. Pods that are deleted stay
// Terminating; kube-controller-manager marks the node NotReady (Ready=Unknown) once
// nodeMonitorGracePeriod (40s) passed without a heartbeat, and then taints it unreachable.
// It removes the node's KwokNodeLabel.
func (c *Cluster) StopKubelet(ctx context.Context, node string) error {
	return c.patchNodeMetadata(ctx, node, "labels", KwokNodeLabel, nil)
}

// StartKubelet starts again the fake kubelet StopKubelet stopped: kwok takes the node back
// (within a few seconds), marks it Ready and carries on with its pods.
func (c *Cluster) StartKubelet(ctx context.Context, node string) error {
	return c.patchNodeMetadata(ctx, node, "labels", KwokNodeLabel, ptr.To("fake"))
}

// HoldNodeStatus makes kwok leave the node's status alone, as a kubelet restarting leaves it
// to the kubelet that comes back: the node reports what the caller writes (MarkNodeNotReady),
// while kwok goes on renewing its Lease and playing its pods. A reboot is HoldNodeStatus,
// MarkNodeNotReady, MarkNodeNotReady with the new boot ID, then ReleaseNodeStatus.
//
// Unlike StopKubelet, the node stays kwok's: taking a node out of kwok's selection and back
// while kwok renews its Lease can queue the node twice in kwok v0.8.0's lease controller, and
// the duplicate, stuck at the head of its queue, stops the renewal of every node's Lease (the
// whole fleet goes NotReady).
func (c *Cluster) HoldNodeStatus(ctx context.Context, node string) error {
	return c.patchNodeMetadata(ctx, node, "annotations", NodeStatusHeldAnnotation, ptr.To("true"))
}

// ReleaseNodeStatus ends HoldNodeStatus: kwok writes the node's status again, and marks it
// Ready at once if it is not, keeping its boot ID.
func (c *Cluster) ReleaseNodeStatus(ctx context.Context, node string) error {
	return c.patchNodeMetadata(ctx, node, "annotations", NodeStatusHeldAnnotation, nil)
}

// MarkNodeNotReady writes the node's Ready condition False with the message "rebooting", as a
// kubelet going down or coming back up does, and its boot ID when bootID is set. Unless the
// node's status is held (HoldNodeStatus) or its kubelet stopped (StopKubelet), kwok marks it
// Ready again at once.
func (c *Cluster) MarkNodeNotReady(ctx context.Context, node, bootID string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	nodeInfo := ""
	if bootID != "" {
		nodeInfo = fmt.Sprintf(`,"nodeInfo":{"bootID":%q}`, bootID)
	}
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":%q,"status":"False","reason":"KubeletNotReady","message":"rebooting","lastHeartbeatTime":%q,"lastTransitionTime":%q}]%s}}`,
		corev1.NodeReady, now, now, nodeInfo)
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("marking node %s NotReady: %w", node, err)
	}
	return nil
}

// patchNodeMetadata sets the node's label or annotation (field "labels" or "annotations") key to
// value, or removes it when value is nil.
func (c *Cluster) patchNodeMetadata(ctx context.Context, node, field, key string, value *string) error {
	patch := fmt.Appendf(nil, `{"metadata":{%q:{%q:null}}}`, field, key)
	if value != nil {
		patch = fmt.Appendf(nil, `{"metadata":{%q:{%q:%q}}}`, field, key, *value)
	}
	_, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// createNodes creates the nodes numbered indexes that do not exist yet, adjusted by opts, in
// parallel, and waits until all of them are Ready.
func (c *Cluster) createNodes(ctx context.Context, indexes []int, opts ...NodeOption) ([]string, error) {
	start := time.Now()
	names := make([]string, len(indexes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(nodeCreateWorkers)
	for i, index := range indexes {
		node := newNode(index)
		for _, opt := range opts {
			opt(node)
		}
		names[i] = node.Name
		g.Go(func() error {
			_, err := c.client.CoreV1().Nodes().Create(gctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("creating nodes: %w", err)
	}
	if err := c.waitNodesReady(ctx, names); err != nil {
		return nil, err
	}
	if len(names) > 0 {
		c.log.Info("Nodes are Ready", "count", len(names), "took", time.Since(start).Round(time.Millisecond))
	}
	return names, nil
}

// waitNodesReady waits until the named nodes are Ready and schedulable: the node lifecycle
// controller removed the not-ready taint new nodes get.
func (c *Cluster) waitNodesReady(ctx context.Context, names []string) error {
	return c.waitNodesReadySelector(ctx, names, NodeTypeLabel+"=kwok")
}

// waitNodesReadySelector waits until the named nodes, which labelSelector selects, are Ready
// and schedulable.
func (c *Cluster) waitNodesReadySelector(ctx context.Context, names []string, labelSelector string) error {
	want := sets.New(names...)
	var notReady []string
	// A watch, not a list polled: thousands of nodes take minutes on 2 cores (kwok initializes
	// about 20 a second), and listing them again and again would slow that down.
	ctx, cancel := context.WithTimeout(ctx, nodesReadyTimeout+time.Duration(len(names))*50*time.Millisecond)
	defer cancel()
	lw := toolscache.NewFilteredListWatchFromClient(c.client.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = labelSelector })
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, nil)
	go inf.RunWithContext(ctx)
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		ready := sets.New[string]()
		for _, o := range inf.GetStore().List() {
			node := o.(*corev1.Node)
			if IsNodeReady(node) && !slices.ContainsFunc(node.Spec.Taints, isNotReadyTaint) {
				ready.Insert(node.Name)
			}
		}
		notReady = sets.List(want.Difference(ready))
		return len(notReady) == 0, nil
	})
	if err != nil && len(notReady) == 0 {
		return fmt.Errorf("waiting for nodes to be Ready: %w", err)
	}
	if err != nil {
		return fmt.Errorf("%d nodes not Ready, such as %s (kwok log: %s): %w",
			len(notReady), notReady[0], logPath(c.dir, kwok), err)
	}
	return nil
}

func isNotReadyTaint(taint corev1.Taint) bool { return taint.Key == corev1.TaintNodeNotReady }

// IsNodeReady reports whether the node's Ready condition is True.
func IsNodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
