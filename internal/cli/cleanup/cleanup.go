// Package cleanup holds `kubectl maintenance cleanup`: it restores what nodemaint changed in the
// cluster (nodes, pods' EvacuationRequests, EvictionRequests, Deployments' surges, the
// NodeMaintenances' finalizer) without the controller, for an uninstall, once it checked that no
// controller runs.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// leaderLease is the name of nodemaint-controller's leader election Lease.
const leaderLease = "nodemaint-controller.nodemaint.dev"

// leasePoll is how often cleanup reads a held leader Lease again, waiting for it to expire.
const leasePoll = time.Second

// NewCommand is `kubectl maintenance cleanup`: it restores what nodemaint changed, without the
// controller.
func NewCommand(o *clioptions.Options) *cobra.Command {
	var (
		force     bool
		namespace string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Restore everything nodemaint changed, without the controller (for uninstall)",
		Long: `cleanup restores what nodemaint changed in the cluster, for when the controller is gone
(uninstall) or cannot run. It does the controller's own cleanup:

  - nodes: uncordons the nodes nodemaint cordoned (annotation nodemaint.dev/cordoned; a node
    cordoned before stays cordoned), removes the nodemaint.dev/maintenance-planned taint, the
    out-of-service taint where nodemaint applied it (annotation nodemaint.dev/out-of-service),
    nodemaint's annotations (and nodemaint.dev/complete), the UnderMaintenance condition and
    the KEP-5683 node conditions nodemaint set (reason NodeMaintenance);
  - pods: removes the EvacuationRequest condition nodemaint set (reason NodeMaintenance), never
    another requester's;
  - EvictionRequests (where lifecycle.k8s.io/v1alpha1 is served): deletes nodemaint's (requester
    nodemaint.dev/node-maintenance), never another requester's; their Evictions go with them;
  - Deployments: rolls a surge in progress back exactly as the Deployment responder does when a
    maintenance ends early, withdraws its EvacuationInitiated answers, restores the pods'
    deletion costs once the ReplicaSet removed the surge's pods, and removes its annotations
    from Deployments and ReplicaSets;
  - NodeMaintenances: removes their finalizer, so that a NodeMaintenance being deleted goes and
    the CRD can be deleted. It does not delete them: they are your declarations, and a
    controller started again would carry them out again. Delete them, or the CRDs, afterwards.
  - Cluster API Machines (where the cluster serves them): removes nodemaint's pre-drain hook
    (` + nodemaintv1alpha1.ClusterAPIPreDrainHook + `), which would hold every
    Machine's deletion without the controller. Remove it from your MachineDeployments' and
    control planes' machine templates too, or Cluster API puts it on their next Machines.

It refuses to run while a controller holds its leader Lease (a Lease held but no longer renewed,
as a controller just uninstalled leaves it, it waits out: at most its duration, 15s), or a nodemaint-controller
Deployment has available replicas (one run without leader election holds no Lease), in any
namespace: it would redo its work. --force skips both checks. It is idempotent: run it again until it says there is nothing left.`,
		Example: `  # Uninstall: stop the controller, then
  kubectl maintenance cleanup --dry-run=client
  kubectl maintenance cleanup
  kubectl delete crd nodemaintenances.nodemaint.dev drainrules.nodemaint.dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dryRun, err := clioptions.DryRun(cmd)
			if err != nil {
				return err
			}
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !force {
				if err := checkNoLeader(ctx, c, namespace, o.Streams.ErrOut, time.Now, leasePoll); err != nil {
					return err
				}
				if err := checkNoDeployment(ctx, c, namespace); err != nil {
					return err
				}
			}
			cl := &cleaner{c: clioptions.DryRunClient(c, dryRun), out: o.Streams.Out, dryRun: dryRun == cmdutil.DryRunClient, serverDryRun: dryRun == cmdutil.DryRunServer}
			return cl.run(ctx, timeout)
		},
	}
	clioptions.AddDryRunFlag(cmd, `"none", "client" (print what would be done, change nothing) or "server" (the same, each write sent to the API server as a dry run: validated and admitted, not stored)`)
	cmd.Flags().BoolVar(&force, "force", false, "Run even though a controller holds its leader Lease (it would redo its work)")
	cmd.Flags().StringVar(&namespace, "controller-namespace", "nodemaint-system", "Namespace of the controller's leader election Lease, read when you may not list Leases in every namespace")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for ReplicaSets to remove the pods of a rolled back surge")
	return cmd
}

// checkNoLeader refuses while a controller holds its leader Lease (held by someone and renewed
// within its duration) in any namespace: Helm installs the controller in the release's namespace,
// kustomize in nodemaint-system, and a cleanup that looked in one of them only would undo the
// work of a controller running in the other, which would redo it. Where the user may not list
// Leases in every namespace, it reads the Lease in namespace (--controller-namespace) and says that
// it looked there only.
//
// A controller that stopped may leave its Lease held: helm uninstall and kubectl delete remove its
// ServiceAccount and Role with its Deployment, so that its pods' last write, the Lease's release,
// is refused. So a held Lease is read again every poll until it expires (at most its duration,
// 15s by default) or is renewed: only a renewal, or a new holder, shows a running controller.
func checkNoLeader(ctx context.Context, c client.Reader, namespace string, errOut io.Writer, now func() time.Time, poll time.Duration) error {
	leases, where, err := leaderLeases(ctx, c, namespace)
	if err != nil {
		return err
	}
	type holding struct {
		holder string
		renew  time.Time
	}
	held := map[types.NamespacedName]holding{}
	for i := range leases {
		lease := &leases[i]
		if holder, ok := leaseHeld(lease, now()); ok {
			held[client.ObjectKeyFromObject(lease)] = holding{holder, lease.Spec.RenewTime.Time}
			fmt.Fprintf(errOut, "The leader Lease %s/%s is held by %s, renewed at %s: waiting until it expires, unless a running controller renews it\n",
				lease.Namespace, lease.Name, holder, lease.Spec.RenewTime.UTC().Format(time.RFC3339))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return wait.PollUntilContextCancel(ctx, poll, false, func(ctx context.Context) (bool, error) {
		leases, _, err := leaderLeases(ctx, c, namespace)
		if err != nil {
			return false, err
		}
		expired := true
		for i := range leases {
			lease := &leases[i]
			holder, ok := leaseHeld(lease, now())
			if !ok {
				continue
			}
			if was, seen := held[client.ObjectKeyFromObject(lease)]; !seen || was.holder != holder || !was.renew.Equal(lease.Spec.RenewTime.Time) {
				return false, fmt.Errorf("nodemaint-controller %s holds the leader Lease %s/%s (found %s): a running controller would redo what cleanup undoes; stop it first (or --force)", holder, lease.Namespace, leaderLease, where)
			}
			expired = false
		}
		return expired, nil
	})
}

// leaderLeases reads nodemaint-controller's leader Leases in every namespace, or in namespace
// where the user may not list them everywhere, and says where it looked.
func leaderLeases(ctx context.Context, c client.Reader, namespace string) ([]coordinationv1.Lease, string, error) {
	var leases coordinationv1.LeaseList
	err := c.List(ctx, &leases, client.MatchingFields{"metadata.name": leaderLease})
	where := "in any namespace"
	if apierrors.IsForbidden(err) {
		where = "in namespace " + namespace + " (you may not list Leases in every namespace; --controller-namespace names another)"
		leases.Items = nil
		lease := &coordinationv1.Lease{}
		switch err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaderLease}, lease); {
		case apierrors.IsNotFound(err):
			err = nil
		case err == nil:
			leases.Items = append(leases.Items, *lease)
		}
	}
	if err != nil {
		return nil, where, fmt.Errorf("reading the leader Lease %s %s to check that no controller runs: %w (--force skips the check)", leaderLease, where, err)
	}
	var named []coordinationv1.Lease
	for _, l := range leases.Items {
		if l.Name == leaderLease {
			named = append(named, l)
		}
	}
	return named, where, nil
}

// controllerLabels select nodemaint-controller's Deployment, as config/manager and the Helm
// chart label it.
var controllerLabels = client.MatchingLabels{"app.kubernetes.io/name": "nodemaint-controller"}

// checkNoDeployment refuses while a Deployment of nodemaint-controller has available replicas in
// any namespace: a controller run without leader election (the chart's
// leaderElection.enabled=false) holds no Lease for checkNoLeader to see. Where the user may not
// list Deployments in every namespace, it lists those of namespace (--controller-namespace).
func checkNoDeployment(ctx context.Context, c client.Reader, namespace string) error {
	var list appsv1.DeploymentList
	where := "in any namespace"
	err := c.List(ctx, &list, controllerLabels)
	if apierrors.IsForbidden(err) {
		where = "in namespace " + namespace + " (you may not list Deployments in every namespace; --controller-namespace names another)"
		err = c.List(ctx, &list, client.InNamespace(namespace), controllerLabels)
	}
	if err != nil {
		return fmt.Errorf("listing the Deployments of nodemaint-controller %s to check that no controller runs: %w (--force skips the check)", where, err)
	}
	for _, d := range list.Items {
		if d.Status.AvailableReplicas > 0 {
			return fmt.Errorf("nodemaint-controller's Deployment %s/%s has %d available replicas: a running controller would redo what cleanup undoes; scale it to 0 or delete it first (or --force)",
				d.Namespace, d.Name, d.Status.AvailableReplicas)
		}
	}
	return nil
}

// leaseHeld reports whether the Lease has a holder that renewed it within its duration.
func leaseHeld(lease *coordinationv1.Lease, now time.Time) (string, bool) {
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" || lease.Spec.RenewTime == nil {
		return holder, false
	}
	duration := 15 * time.Second
	if lease.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	return holder, now.Before(lease.Spec.RenewTime.Add(duration))
}

// restoreNode removes from the node, in memory, what nodemaint changed in its spec and
// metadata, and returns one line per change.
func restoreNode(node *corev1.Node) []string {
	var changes []string
	a := node.Annotations
	if a[nodemaintv1alpha1.CordonedAnnotation] != "" {
		if node.Spec.Unschedulable {
			node.Spec.Unschedulable = false
			changes = append(changes, "uncordoned (nodemaint cordoned it)")
		}
	}
	if _, ours := a[nodemaintv1alpha1.OutOfServiceAnnotation]; ours {
		changes = append(changes, dropTaints(node, corev1.TaintNodeOutOfService, " (nodemaint applied it)")...)
	}
	changes = append(changes, dropTaints(node, nodemaintv1alpha1.PlannedMaintenanceTaint, "")...)
	for _, k := range nodedecide.HeldAutoscalers(node) {
		if a[k] == "true" {
			delete(a, k)
			changes = append(changes, "removed annotation "+k+" (nodemaint set it)")
		}
	}
	for _, k := range []string{nodemaintv1alpha1.AutoscalersHeldAnnotation, nodemaintv1alpha1.CordonedAnnotation, nodemaintv1alpha1.MaintenancesAnnotation, nodemaintv1alpha1.OutOfServiceAnnotation, nodemaintv1alpha1.CompleteAnnotation, nodemaintv1alpha1.DrainStartedAnnotation} {
		if _, ok := a[k]; ok {
			delete(a, k)
			changes = append(changes, "removed annotation "+k)
		}
	}
	return changes
}

// dropTaints removes the node's taints of the key, in memory, and returns one line per taint
// removed, each followed by note.
func dropTaints(node *corev1.Node, key, note string) []string {
	var changes []string
	kept := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			changes = append(changes, fmt.Sprintf("removed taint %s:%s%s", t.Key, t.Effect, note))
			continue
		}
		kept = append(kept, t)
	}
	node.Spec.Taints = kept
	return changes
}

// removeNodeConditions removes from the node, in memory, the conditions nodemaint sets:
// UnderMaintenance, and the KEP-5683 lifecycle conditions of reason NodeMaintenance (another
// tool's stay). It returns the types removed.
func removeNodeConditions(node *corev1.Node) []corev1.NodeConditionType {
	var removed []corev1.NodeConditionType
	kept := node.Status.Conditions[:0:0]
	for _, c := range node.Status.Conditions {
		if ourNodeCondition(c) {
			removed = append(removed, c.Type)
			continue
		}
		kept = append(kept, c)
	}
	node.Status.Conditions = kept
	return removed
}

// ourNodeCondition reports whether nodemaint set the node condition.
func ourNodeCondition(c corev1.NodeCondition) bool {
	switch c.Type {
	case nodemaintv1alpha1.NodeConditionUnderMaintenance:
		return true
	case corev1.NodeMaintenancePlanned, corev1.NodeMaintenanceInProgress, corev1.NodeDrainInProgress, corev1.NodeDrained:
		return c.Reason == nodemaintv1alpha1.NodeConditionReasonNodeMaintenance
	}
	return false
}

// ourRequest reports whether the pod carries nodemaint's EvacuationRequest.
func ourRequest(pod *corev1.Pod) bool {
	c := evacuation.Condition(pod, evacuation.Request)
	return c != nil && c.Reason == evacuation.ReasonNodeMaintenance
}

// cleaner carries out the cleanup and prints what it does.
type cleaner struct {
	c      client.Client
	out    io.Writer
	dryRun bool // client: writes nothing
	// serverDryRun: c sends every write as a dry run; nothing changes, so nothing is waited for.
	serverDryRun bool
	changes      int
}

// suffix marks what a dry run would do, as kubectl marks it.
func (cl *cleaner) suffix() string {
	switch {
	case cl.dryRun:
		return " (dry run)"
	case cl.serverDryRun:
		return " (server dry run)"
	}
	return ""
}

func (cl *cleaner) report(obj, change string) {
	cl.changes++
	change += cl.suffix()
	fmt.Fprintf(cl.out, "%s: %s\n", obj, change)
}

func (cl *cleaner) run(ctx context.Context, timeout time.Duration) error {
	var errs []error
	if err := cl.pods(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := cl.evictionRequests(ctx); err != nil {
		errs = append(errs, err)
	}
	again, err := cl.deployments(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	if err := cl.nodes(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := cl.maintenances(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := cl.machines(ctx); err != nil {
		errs = append(errs, err)
	}
	// The ReplicaSets remove the pods of the surges rolled back; then their marks go.
	deadline := time.Now().Add(timeout)
	for again && !cl.dryRun && !cl.serverDryRun && len(errs) == 0 {
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("ReplicaSets did not remove the pods of rolled back surges within %v: run cleanup again", timeout))
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if again, err = cl.deployments(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if cl.changes == 0 {
		fmt.Fprintln(cl.out, "Nothing of nodemaint's left to clean up.")
	}
	return nil
}

// pods removes nodemaint's EvacuationRequest from every pod.
func (cl *cleaner) pods(ctx context.Context) error {
	var pods corev1.PodList
	if err := cl.c.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var errs []error
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !ourRequest(pod) {
			continue
		}
		cl.report("pod/"+pod.Namespace+"/"+pod.Name, "removed "+string(evacuation.Request)+" (reason "+evacuation.ReasonNodeMaintenance+")")
		if cl.dryRun {
			continue
		}
		if err := cl.withdraw(ctx, pod); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// withdraw removes nodemaint's EvacuationRequest from the pod as read, and only from it
// (evacuation.RemoveConditionPatch: its UID and resourceVersion), so that a request another
// requester set since the read stays. A pod changed since the read is read again and looked at
// again, a few times; a pod gone has nothing left.
func (cl *cleaner) withdraw(ctx context.Context, pod *corev1.Pod) error {
	const attempts = 5
	for range attempts {
		err := cl.c.Status().Patch(ctx, pod.DeepCopy(), evacuation.RemoveConditionPatch(pod, evacuation.Request))
		if !evacuation.Stale(err) {
			return err
		}
		fresh := &corev1.Pod{}
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil || fresh.UID != pod.UID {
			return client.IgnoreNotFound(err)
		}
		if !ourRequest(fresh) {
			return nil
		}
		pod = fresh
	}
	return fmt.Errorf("the pod changed %d times while its %s was withdrawn", attempts, evacuation.Request)
}

// evictionRequests deletes nodemaint's EvictionRequests; nothing where the API is not served.
func (cl *cleaner) evictionRequests(ctx context.Context) error {
	var reqs lifecyclev1alpha1.EvictionRequestList
	err := cl.c.List(ctx, &reqs, client.HasLabels{requester.NodeLabel})
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing EvictionRequests: %w", err)
	}
	var errs []error
	for i := range reqs.Items {
		r := &reqs.Items[i]
		if r.Spec.Requester != ernames.Requester {
			continue
		}
		cl.report("evictionrequest/"+r.Namespace+"/"+r.Name, "deleted")
		if cl.dryRun {
			continue
		}
		if err := cl.c.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("EvictionRequest %s/%s: %w", r.Namespace, r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// deployments releases every Deployment from the responder (deployment.Release). It reports
// whether some still wait for their ReplicaSets.
func (cl *cleaner) deployments(ctx context.Context) (bool, error) {
	var (
		deps appsv1.DeploymentList
		rss  appsv1.ReplicaSetList
		pods corev1.PodList
		hpas autoscalingv2.HorizontalPodAutoscalerList
	)
	for _, l := range []client.ObjectList{&deps, &rss, &pods, &hpas} {
		if err := cl.c.List(ctx, l); err != nil {
			return false, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	rsOf := map[types.UID][]*appsv1.ReplicaSet{}
	for i := range rss.Items {
		if ref := metav1.GetControllerOf(&rss.Items[i]); ref != nil {
			rsOf[ref.UID] = append(rsOf[ref.UID], &rss.Items[i])
		}
	}
	podsOf := map[types.UID][]*corev1.Pod{}
	for i := range pods.Items {
		if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil {
			podsOf[ref.UID] = append(podsOf[ref.UID], &pods.Items[i])
		}
	}
	hpaList := make([]*autoscalingv2.HorizontalPodAutoscaler, len(hpas.Items))
	for i := range hpas.Items {
		hpaList[i] = &hpas.Items[i]
	}
	var errs []error
	again := false
	for i := range deps.Items {
		d := &deps.Items[i]
		var ps []*corev1.Pod
		for _, rs := range rsOf[d.UID] {
			ps = append(ps, podsOf[rs.UID]...)
		}
		changes, more, err := deployment.Release(ctx, cl.c, d, rsOf[d.UID], ps, hpaList, cl.dryRun)
		for _, ch := range changes {
			cl.changes++
			fmt.Fprintln(cl.out, ch+cl.suffix())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err))
		}
		again = again || more
	}
	return again, errors.Join(errs...)
}

// nodes restores every node.
func (cl *cleaner) nodes(ctx context.Context) error {
	var nodes corev1.NodeList
	if err := cl.c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var errs []error
	for i := range nodes.Items {
		node := &nodes.Items[i]
		orig := node.DeepCopy()
		for _, ch := range restoreNode(node) {
			cl.report("node/"+node.Name, ch)
		}
		if !cl.dryRun && (!equality.Semantic.DeepEqual(orig.Spec, node.Spec) || !equality.Semantic.DeepEqual(orig.Annotations, node.Annotations)) {
			if err := cl.c.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", node.Name, err))
				continue
			}
		}
		orig = node.DeepCopy()
		if removed := removeNodeConditions(node); len(removed) > 0 {
			for _, t := range removed {
				cl.report("node/"+node.Name, "removed condition "+string(t))
			}
			if !cl.dryRun {
				if err := cl.c.Status().Patch(ctx, node, client.StrategicMergeFrom(orig)); err != nil {
					errs = append(errs, fmt.Errorf("node %s status: %w", node.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// maintenances removes nodemaint's finalizer from every NodeMaintenance.
func (cl *cleaner) maintenances(ctx context.Context) error {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := cl.c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil // the CRD is gone already
		}
		return fmt.Errorf("listing NodeMaintenances: %w", err)
	}
	var errs []error
	for i := range list.Items {
		nm := &list.Items[i]
		if !controllerutil.ContainsFinalizer(nm, nodemaintv1alpha1.Finalizer) {
			continue
		}
		change := "removed finalizer " + nodemaintv1alpha1.Finalizer
		if !nm.DeletionTimestamp.IsZero() {
			change += " (it was being deleted: it goes now)"
		}
		cl.report("nodemaintenance.nodemaint.dev/"+nm.Name, change)
		if cl.dryRun {
			continue
		}
		orig := nm.DeepCopy()
		controllerutil.RemoveFinalizer(nm, nodemaintv1alpha1.Finalizer)
		if err := cl.c.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("NodeMaintenance %s: %w", nm.Name, err))
		}
	}
	return errors.Join(errs...)
}

// machineKind is Cluster API's Machine, in whichever version the cluster prefers.
var machineKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}

// machines removes nodemaint's pre-drain hook from every Cluster API Machine; nothing where the
// cluster serves no Machines. Each patch carries the Machine's resourceVersion.
func (cl *cleaner) machines(ctx context.Context) error {
	mapping, err := cl.c.RESTMapper().RESTMapping(machineKind)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up Cluster API's Machines: %w", err)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind("MachineList"))
	if err := cl.c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("listing Machines: %w", err)
	}
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		if _, hooked := m.Annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]; !hooked {
			continue
		}
		cl.report("machine.cluster.x-k8s.io/"+m.Namespace+"/"+m.Name, "removed annotation "+nodemaintv1alpha1.ClusterAPIPreDrainHook)
		if cl.dryRun {
			continue
		}
		m.SetGroupVersionKind(mapping.GroupVersionKind)
		orig := m.DeepCopy()
		delete(m.Annotations, nodemaintv1alpha1.ClusterAPIPreDrainHook)
		if err := cl.c.Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("releasing Machine %s/%s: %w", m.Namespace, m.Name, err))
		}
	}
	return errors.Join(errs...)
}
