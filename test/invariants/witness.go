package invariants

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// WitnessFinalizer is the finalizer Options.Witness puts on every pod of the watched
// namespaces. A pod deleted while the checker's watch is broken stays, terminating, with its
// deletionTimestamp, until the checker has seen it so: a gap's replay then knows when it left
// instead of assuming the worst. The checker removes it as soon as it has applied the
// terminating pod (never while a gap is open), and from every pod when it stops.
const WitnessFinalizer = "invariants.nodemaint.dev/witness"

// witness keeps WitnessFinalizer on the pods of the state: added to those not terminating,
// removed from those terminating, one pod key at a time.
type witness struct {
	c     *Checker
	queue workqueue.TypedRateLimitingInterface[string]
}

func newWitness(c *Checker) *witness {
	return &witness{c: c, queue: workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second))}
}

// run works the queue until it shuts down.
func (w *witness) run() {
	for {
		k, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		retry, err := w.sync(k)
		switch {
		case err != nil && w.c.ctx.Err() == nil:
			w.queue.AddRateLimited(k)
		case retry > 0:
			w.queue.AddAfter(k, retry)
		default:
			w.queue.Forget(k)
		}
		w.queue.Done(k)
	}
}

// sync brings the pod's finalizer where it belongs, as the state knows the pod. It asks to be
// called again after retry while a gap is open.
func (w *witness) sync(k string) (retry time.Duration, err error) {
	w.c.mu.Lock()
	pod, inGap := w.c.state.pods[k], w.c.state.gap != nil
	w.c.mu.Unlock()
	if pod == nil {
		return 0, nil
	}
	i := slices.Index(pod.Finalizers, WitnessFinalizer)
	var patch []map[string]any
	switch {
	case pod.DeletionTimestamp == nil && i < 0:
		// The resourceVersion test makes the add of a first finalizer safe against another's.
		patch = []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": pod.ResourceVersion}}
		if len(pod.Finalizers) == 0 {
			patch = append(patch, map[string]any{"op": "add", "path": "/metadata/finalizers", "value": []string{WitnessFinalizer}})
		} else {
			patch = append(patch, map[string]any{"op": "add", "path": "/metadata/finalizers/-", "value": WitnessFinalizer})
		}
	case pod.DeletionTimestamp != nil && i >= 0:
		if inGap {
			return time.Second, nil
		}
		patch = removeAt(i)
	default:
		return 0, nil
	}
	return 0, w.patch(w.c.ctx, pod.Namespace, pod.Name, patch)
}

// removeAt is the JSON patch that removes WitnessFinalizer at index i.
func removeAt(i int) []map[string]any {
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	return []map[string]any{{"op": "test", "path": path, "value": WitnessFinalizer}, {"op": "remove", "path": path}}
}

func (w *witness) patch(ctx context.Context, namespace, name string, patch []map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = w.c.client.CoreV1().Pods(namespace).Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// release removes WitnessFinalizer from every pod of the namespaces, read afresh.
func (w *witness) release(namespaces []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed []string
	for _, ns := range namespaces {
		pods, err := w.c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if j := slices.Index(pod.Finalizers, WitnessFinalizer); j >= 0 {
				if err := w.patch(ctx, pod.Namespace, pod.Name, removeAt(j)); err != nil {
					failed = append(failed, fmt.Sprintf("%s/%s: %v", pod.Namespace, pod.Name, err))
				}
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("removing %s: %s", WitnessFinalizer, strings.Join(failed, "; "))
	}
	return nil
}

// podKey returns the state's key of a pod.
func podKey(pod *corev1.Pod) string { return key(pod.Namespace, pod.Name) }
