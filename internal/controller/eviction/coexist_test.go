package eviction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaint/nodemaint/internal/controller/eviction"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// written records the writes of every Eviction controller instance of these tests, by instance,
// as their clients send them (startInstance).
var written = &writes{
	creator: map[types.UID]string{}, created: map[types.UID][]string{}, evicted: map[types.UID][]string{},
	requestWriters: map[types.UID][]string{},
}

// writes is what the instances wrote: who created each Eviction, the writes (attempted, whatever
// their outcome) to an Eviction another instance created, the evictions sent, and who wrote the
// status of the requests of each pod.
type writes struct {
	mu sync.Mutex
	// creator: an Eviction's UID to the instance that created it.
	creator map[types.UID]string
	// created and evicted: a pod's UID to the instances that created an Eviction of it, or
	// evicted it (successfully).
	created, evicted map[types.UID][]string
	// requestWriters: a pod's UID to the instances that wrote the status of one of its
	// EvictionRequests (successfully).
	requestWriters map[types.UID][]string
	// foreign are the writes of an instance to an Eviction it did not create.
	foreign []string
	// leaveTo: a pod's name to the instance that is to create its Eviction. Another instance's
	// create waits until an Eviction of the pod exists (and then fails, the name taken): so each
	// instance is the other for some pods, whatever their caches' pace.
	leaveTo map[string]string
}

// wait holds the instance's create of the Eviction until one of the pod exists, when the pod is
// left to another instance (leaveTo).
func (w *writes) wait(ctx context.Context, instance string, e *lifecyclev1alpha1.Eviction) {
	w.mu.Lock()
	to := w.leaveTo[e.Spec.Target.Pod.Name]
	w.mu.Unlock()
	if to == "" || to == instance {
		return
	}
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list lifecyclev1alpha1.EvictionList
		err := k8s.List(ctx, &list, client.InNamespace(e.Namespace))
		return slices.ContainsFunc(list.Items, func(o lifecyclev1alpha1.Eviction) bool {
			return o.Spec.Target.Pod != nil && o.Spec.Target.Pod.UID == e.Spec.Target.Pod.UID
		}), err
	})
}

// client is the instance's client, recording its writes.
func (w *writes) client(instance string, base client.WithWatch) client.WithWatch {
	return interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if e, ok := obj.(*lifecyclev1alpha1.Eviction); ok {
				w.wait(ctx, instance, e)
			}
			err := c.Create(ctx, obj, opts...)
			if e, ok := obj.(*lifecyclev1alpha1.Eviction); ok && err == nil {
				w.mu.Lock()
				w.creator[e.UID] = instance
				w.created[e.Spec.Target.Pod.UID] = append(w.created[e.Spec.Target.Pod.UID], instance)
				w.mu.Unlock()
			}
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.touch(instance, "updated", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.touch(instance, "patched", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.touch(instance, "deleted", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.touch(instance, "wrote the "+sub+" of", obj)
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if r, ok := obj.(*lifecyclev1alpha1.EvictionRequest); ok && err == nil && r.Spec.Target.Pod != nil {
				w.mu.Lock()
				w.requestWriters[r.Spec.Target.Pod.UID] = append(w.requestWriters[r.Spec.Target.Pod.UID], instance)
				w.mu.Unlock()
			}
			return err
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
			err := c.SubResource(sub).Create(ctx, obj, subResource, opts...)
			if sub == "eviction" && err == nil {
				w.mu.Lock()
				w.evicted[obj.GetUID()] = append(w.evicted[obj.GetUID()], instance)
				w.mu.Unlock()
			}
			return err
		},
	})
}

// touch records a write to an Eviction that the instance did not create.
func (w *writes) touch(instance, verb string, obj client.Object) {
	if _, ok := obj.(*lifecyclev1alpha1.Eviction); !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if creator := w.creator[obj.GetUID()]; creator != instance {
		w.foreign = append(w.foreign, fmt.Sprintf("%s %s Eviction %s, created by %q", instance, verb, obj.GetName(), creator))
	}
}

// of returns a copy of what was recorded of the pod: who created its Eviction, who evicted it,
// who wrote its requests' status.
func (w *writes) of(pod types.UID) (created, evicted, requestWriters []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.created[pod]), slices.Clone(w.evicted[pod]), slices.Clone(w.requestWriters[pod])
}

// fieldManagers watches the Evictions of the namespace and reports, from their managedFields,
// every Eviction written by more than one Eviction controller, or by another than the one its
// mark names; stop ends the watch and returns them.
func fieldManagers(t *testing.T, namespace string) (stop func() []string) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &lifecyclev1alpha1.EvictionList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*lifecyclev1alpha1.Eviction)
			if !ok {
				continue
			}
			var managers []string
			for _, mf := range e.ManagedFields {
				if strings.HasPrefix(mf.Manager, eviction.FieldManager("")) && !slices.Contains(managers, mf.Manager) {
					managers = append(managers, mf.Manager)
				}
			}
			mark := eviction.FieldManager(e.Labels[evictionrequest.ControllerLabel])
			if len(managers) > 1 || len(managers) == 1 && managers[0] != mark {
				found = append(found, fmt.Sprintf("Eviction %s (marked %s) written by %v", e.Name, mark, managers))
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		return found
	}
}

// TestTwoControllers: nodemaint's Eviction controller beside another (a second installation,
// instance "b", started with --eviction-controller=on, beside "a"), and a third ("c", auto)
// started once another's Eviction exists. Each pod gets exactly one Eviction and is evicted
// once; no instance writes to or deletes an Eviction of another (their clients' records, and
// the Evictions' managedFields), nor writes the status of the requests of a pod another's
// Eviction answers; "c" stands aside (creates nothing) and says so; the requests end.
func TestTwoControllers(t *testing.T) {
	watched := fieldManagers(t, "default")
	stopB, err := startInstance("b", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopB() })

	// An Eviction that stays: a pod only nodemaint's drain asks for is held by the imperative
	// evictor. "c" starts once its cache can show it.
	held := createPod(t, "coexist-held")
	request(t, held, evictionrequest.Requester)
	eventually(t, "the held pod's Eviction", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, held)
		return e != nil, "no Eviction", err
	})
	since := time.Now()
	stopC, err := startInstance("c", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopC() })

	// Three pods each instance is to create the Eviction of (the other's create waits for it).
	var pods []*lifecyclev1alpha1.EvictionRequest
	written.mu.Lock()
	written.leaveTo = map[string]string{}
	for i := range 6 {
		written.leaveTo[fmt.Sprintf("coexist-%d", i)] = []string{"a", "b"}[i%2]
	}
	written.mu.Unlock()
	t.Cleanup(func() {
		written.mu.Lock()
		written.leaveTo = nil
		written.mu.Unlock()
	})
	for i := range 6 {
		pod := createPod(t, fmt.Sprintf("coexist-%d", i))
		pods = append(pods, request(t, pod, descheduler))
	}
	for _, req := range pods {
		eventually(t, "evicted: "+req.Spec.Target.Pod.Name, func(ctx context.Context) (bool, string, error) {
			r := &lifecyclev1alpha1.EvictionRequest{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(req), r); err != nil {
				return false, "", err
			}
			// The request ends: its target is evicted, as the controller of its Eviction says.
			return meta.IsStatusConditionTrue(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)), fmt.Sprint(r.Status.Conditions), nil
		})
	}
	shares := map[string]int{}
	for _, req := range pods {
		created, evicted, requestWriters := written.of(req.Spec.Target.Pod.UID)
		if len(created) != 1 {
			t.Errorf("%s: Evictions created by %v: want one", req.Spec.Target.Pod.Name, created)
		}
		if len(evicted) != 1 {
			t.Errorf("%s: evicted by %v: want one", req.Spec.Target.Pod.Name, evicted)
		}
		if len(created) != 1 || len(evicted) != 1 {
			continue
		}
		if created[0] == "c" {
			t.Errorf("%s: Eviction created by c, which stands aside", req.Spec.Target.Pod.Name)
		}
		if slices.ContainsFunc(requestWriters, func(w string) bool { return w != created[0] }) {
			t.Errorf("%s: its requests' status written by %v, its Eviction created by %s", req.Spec.Target.Pod.Name, requestWriters, created[0])
		}
		shares[created[0]]++
	}
	t.Logf("Evictions created, by instance: %v", shares)
	for _, instance := range []string{"a", "b"} {
		if shares[instance] != 3 {
			t.Errorf("Evictions created by %s: %d; want 3, as leaveTo arranged", instance, shares[instance])
		}
	}
	written.mu.Lock()
	foreign := slices.Clone(written.foreign)
	written.mu.Unlock()
	if len(foreign) > 0 {
		t.Errorf("writes to another instance's Evictions: %v", foreign)
	}
	if found := watched(); len(found) > 0 {
		t.Errorf("Evictions written by another controller than their creator: %v", found)
	}
	eventually(t, `"c" says another Eviction controller answers`, func(context.Context) (bool, string, error) {
		seen := logs.Since(since, "another Eviction controller answers: this one creates no Eviction and carries its own to their end", map[string]string{"instance": "c"})
		return len(seen) > 0, fmt.Sprint(len(seen)), nil
	})
}
