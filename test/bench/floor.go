package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MethodFloor is no drainer: it measures how fast this cluster can move the scenario's pods at
// all while every Deployment keeps its replicas. Every Deployment is surged at once by all of its
// pods on the target nodes (maxSurge ignored), and scaled back once they are all available; the
// old pods carry the lowest deletion cost (set before the clock starts), so the scale-down
// removes them. No method that keeps the workloads at their replicas does less: each creates,
// schedules and starts a replacement per pod and stops the pod. The ideal (ideal.go) assumes a
// cluster that does that instantly; the floor is what it takes on this one, with the API server,
// etcd, kube-controller-manager, kube-scheduler and kwok's kubelets sharing its cores. Scenarios
// of Deployments only.
const MethodFloor = "floor"

// floorDeletionCost is the deletion cost of the pods on the target nodes: the ReplicaSet removes
// them first when the Deployment scales back.
const floorDeletionCost = "-1000"

// prepareFloor lowers the deletion cost of the workloads' pods on the targets, before the clock
// starts, and returns how many of each Deployment's pods are there.
func (b *bench) prepareFloor(ctx context.Context, s Scenario, ns string, targets []string) (map[string]int32, error) {
	if slices.ContainsFunc(s.Workloads, func(w Workload) bool { return w.Kind != KindDeployment }) {
		return nil, fmt.Errorf("method %s measures scenarios of Deployments only, not %s", MethodFloor, s.Name)
	}
	pods, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	config := b.cluster.RESTConfig()
	config.QPS, config.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	moving := map[string]int32{}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, podDeletionCost, floorDeletionCost)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !slices.Contains(targets, pod.Spec.NodeName) || pod.DeletionTimestamp != nil {
			continue
		}
		moving[pod.Labels[appLabel]]++
		g.Go(func() error {
			_, err := cs.CoreV1().Pods(ns).Patch(gctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	return moving, g.Wait()
}

// podDeletionCost is the annotation by which a ReplicaSet chooses the pods it removes first.
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// drainFloor cordons the targets, surges every Deployment by its pods there at once, waits until
// all are available, and scales them back; it returns once the targets are empty and every
// workload is at its replicas.
func (b *bench) drainFloor(ctx context.Context, ns string, s Scenario, moving map[string]int32, targets []string, tr *tracker) error {
	if err := b.cordon(ctx, targets, true); err != nil {
		return err
	}
	scale := func(replicas func(Workload) int32) error {
		g, ctx := errgroup.WithContext(ctx)
		for _, w := range s.Workloads {
			if moving[w.Name] == 0 {
				continue
			}
			g.Go(func() error {
				patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas(w))
				_, err := b.cs.AppsV1().Deployments(ns).Patch(ctx, w.Name, types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
		}
		return g.Wait()
	}
	surged := func(w Workload) int32 { return w.Replicas + moving[w.Name] }
	if err := scale(surged); err != nil {
		return err
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list appsv1.DeploymentList
		if err := b.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, d := range list.Items {
			if moving[d.Name] == 0 {
				continue
			}
			if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < ptr.Deref(d.Spec.Replicas, 0) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the surged replicas are not available: %w", err)
	}
	slog.Info("The floor's replacements are available")
	if err := scale(func(w Workload) int32 { return w.Replicas }); err != nil {
		return err
	}
	return waitTracker(ctx, tr, "the nodes empty and every workload Ready", func(s snapshot) bool { return s.left == 0 && s.allDesired })
}
