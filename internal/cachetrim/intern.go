package cachetrim

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Interning: the pods of a ReplicaSet (and of a node, a namespace) repeat the same strings and
// the same small maps and slices, and the decoder allocates each anew for every pod. At 10,000
// pods their namespaces, label maps, owner references, tolerations and conditions' types and
// reasons were a quarter of the controller's heap. Objects entering the cache get one shared
// instance of each instead.
//
// Sharing is safe because nothing changes a cached object in place: the cache's readers deep-copy
// by default (a copy gets maps and slices of its own), the readers that do not (the controller's
// observe.PodsOnNode, which reads the pod informer's indexer, and reads with client.UnsafeDisableDeepCopy)
// already share the cached objects' maps and slices and only read them (apply copies a pod
// before it changes it), and the transform only replaces whole values of the object it is given.

// str returns the canonical copy of s: Go's unique package keeps one copy of each distinct string
// in use and forgets it once no object holds it, so the table does not grow with pods that came
// and went.
func str(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// defaultGracePeriod is the one instance of the grace period most pods have, the API server's
// default (30s).
var defaultGracePeriod = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)

// internGracePeriod shares the default terminationGracePeriodSeconds among the pods that have it.
func internGracePeriod(p *int64) *int64 {
	if p != nil && *p == *defaultGracePeriod {
		return defaultGracePeriod
	}
	return p
}

// shared keeps one instance of each distinct value (a label map, an owner reference or toleration
// slice) of the objects entering the cache, under a key that says the value. It forgets what
// it has not been asked for over two rounds of limit distinct values (a round starts when the
// current generation holds limit values), so that it stays small while pods come and go: an
// object that keeps an instance the table forgot keeps it; the next object with that value gets
// a new instance, shared from then on.
type shared[T any] struct {
	mu       sync.Mutex
	limit    int
	cur, old map[string]T
}

func newShared[T any](limit int) *shared[T] {
	return &shared[T]{limit: limit, cur: map[string]T{}}
}

// get returns the instance of the value key says; if there is none, newV makes it.
func (s *shared[T]) get(key string, newV func() T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.cur[key]; ok {
		return have
	}
	v, ok := s.old[key]
	if !ok {
		v = newV()
	}
	if len(s.cur) >= s.limit {
		s.old, s.cur = s.cur, make(map[string]T, s.limit)
	}
	s.cur[key] = v
	return v
}

// sharedLimit is how many distinct values of each kind the tables hold per generation: more
// than the ReplicaSets (label maps, owner references) or the toleration sets of a large cluster
// usually number. With keys of at most 1 KiB (maxShared) a table holds at most a few megabytes
// of its own, usually a few hundred kilobytes.
const sharedLimit = 4096

var (
	labelMaps      = newShared[map[string]string](sharedLimit)
	annotationMaps = newShared[map[string]string](sharedLimit)
	ownerRefs      = newShared[[]metav1.OwnerReference](sharedLimit)
	tolerations    = newShared[[]corev1.Toleration](sharedLimit)
)

// maxShared is the size of the largest value shared: larger ones are seldom a template's.
const maxShared = 1024

// sep separates the parts of a key: it is in no label, name or toleration.
const sep = "\x00"

// internLabels returns the shared instance of a label map (keys and values interned).
func internLabels(m map[string]string) map[string]string { return internMap(labelMaps, m) }

// internAnnotations returns the shared instance of an annotation map: the pods of a ReplicaSet
// have their template's.
func internAnnotations(m map[string]string) map[string]string { return internMap(annotationMaps, m) }

func internMap(table *shared[map[string]string], m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Few labels: an insertion sort allocates nothing.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(sep)
		b.WriteString(m[k])
		b.WriteString(sep)
	}
	if b.Len() > maxShared {
		// An object's own (a CNI's network status, a checksum): sharing would not pay, and the
		// table would keep a copy of it.
		return m
	}
	return table.get(b.String(), func() map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[str(k)] = str(v)
		}
		return out
	})
}

// internOwnerReferences returns the shared instance of an owner reference slice.
func internOwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	var b strings.Builder
	for _, r := range refs {
		for _, s := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID), boolKey(r.Controller), boolKey(r.BlockOwnerDeletion)} {
			b.WriteString(s)
			b.WriteString(sep)
		}
	}
	if b.Len() > maxShared {
		return refs
	}
	return ownerRefs.get(b.String(), func() []metav1.OwnerReference {
		out := make([]metav1.OwnerReference, len(refs))
		for i, r := range refs {
			out[i] = metav1.OwnerReference{
				APIVersion: str(r.APIVersion), Kind: str(r.Kind), Name: str(r.Name), UID: types.UID(str(string(r.UID))),
				Controller: r.Controller, BlockOwnerDeletion: r.BlockOwnerDeletion,
			}
		}
		return out
	})
}

// internTolerations returns the shared instance of a toleration slice.
func internTolerations(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	var b strings.Builder
	for _, t := range ts {
		seconds := "-"
		if t.TolerationSeconds != nil {
			seconds = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		for _, s := range []string{t.Key, string(t.Operator), t.Value, string(t.Effect), seconds} {
			b.WriteString(s)
			b.WriteString(sep)
		}
	}
	if b.Len() > maxShared {
		return ts
	}
	return tolerations.get(b.String(), func() []corev1.Toleration {
		out := make([]corev1.Toleration, len(ts))
		for i, t := range ts {
			out[i] = corev1.Toleration{
				Key: str(t.Key), Operator: corev1.TolerationOperator(str(string(t.Operator))), Value: str(t.Value),
				Effect: corev1.TaintEffect(str(string(t.Effect))), TolerationSeconds: t.TolerationSeconds,
			}
		}
		return out
	})
}

// internStrings returns a copy of m with its keys and values interned: a map of an object's own
// (a node's labels: one value is its hostname) whose strings other objects' maps repeat.
func internStrings(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[str(k)] = str(v)
	}
	return out
}

// internKeys returns a copy of m with its keys interned, not its values (annotations' values are
// often an object's own, large).
func internKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[str(k)] = v
	}
	return out
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	default:
		return "f"
	}
}

var (
	containerSlices = newShared[[]corev1.Container](sharedLimit)
	nodeSelectors   = newShared[map[string]string](sharedLimit)
	affinities      = newShared[*corev1.Affinity](sharedLimit)
	resourceLists   = newShared[corev1.ResourceList](sharedLimit)
	volumeSlices    = newShared[[]corev1.Volume](sharedLimit)
)

// emptyDir is what a cached pod keeps of an emptyDir volume's source: that it is one.
var emptyDir = &corev1.EmptyDirVolumeSource{}

// internVolumes keeps of a pod's volumes its claims (the name of each) and its emptyDirs (that
// they are), and shares the slice when it names no claim (those are a pod's own).
func internVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	claims := false
	var b strings.Builder
	for _, v := range vs {
		switch {
		case v.PersistentVolumeClaim != nil:
			claims = true
			out = append(out, corev1.Volume{Name: str(v.Name), VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
			}})
		case v.EmptyDir != nil:
			out = append(out, corev1.Volume{Name: str(v.Name), VolumeSource: corev1.VolumeSource{EmptyDir: emptyDir}})
			b.WriteString(v.Name)
			b.WriteString(sep)
		}
	}
	if claims || len(out) == 0 || b.Len() > maxShared {
		return out
	}
	return volumeSlices.get(b.String(), func() []corev1.Volume { return out })
}

// internContainers keeps of containers their names and requests (and an init container's
// restart policy, which says whether it runs beside the others): what the scheduler adds up.
// None when no container requests anything. Pods of one template share the slice.
func internContainers(cs []corev1.Container, init bool) []corev1.Container {
	requested := false
	var b strings.Builder
	for _, c := range cs {
		requested = requested || len(c.Resources.Requests) > 0
		b.WriteString(c.Name)
		b.WriteString(sep)
		if init && c.RestartPolicy != nil {
			b.WriteString(string(*c.RestartPolicy))
		}
		b.WriteString(sep)
		resourcesKey(&b, c.Resources.Requests)
	}
	if !requested {
		return nil
	}
	build := func() []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: str(c.Name), Resources: corev1.ResourceRequirements{Requests: internResources(c.Resources.Requests)}}
			if init {
				out[i].RestartPolicy = c.RestartPolicy
			}
		}
		return out
	}
	if b.Len() > maxShared {
		return build()
	}
	return containerSlices.get(b.String(), build)
}

// podRequests keeps of pod-level resources their requests; none when there are none.
func podRequests(r *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if r == nil || len(r.Requests) == 0 {
		return nil
	}
	return &corev1.ResourceRequirements{Requests: internResources(r.Requests)}
}

// internResources returns the shared instance of a resource list (a node's allocatable, a
// container's requests).
func internResources(list corev1.ResourceList) corev1.ResourceList {
	if len(list) == 0 {
		return nil
	}
	var b strings.Builder
	resourcesKey(&b, list)
	if b.Len() > maxShared {
		return list
	}
	return resourceLists.get(b.String(), func() corev1.ResourceList {
		out := make(corev1.ResourceList, len(list))
		for k, q := range list {
			out[corev1.ResourceName(str(string(k)))] = q
		}
		return out
	})
}

// resourcesKey writes the list, sorted by name.
func resourcesKey(b *strings.Builder, list corev1.ResourceList) {
	names := make([]string, 0, len(list))
	for k := range list {
		names = append(names, string(k))
	}
	sort.Strings(names)
	for _, k := range names {
		q := list[corev1.ResourceName(k)]
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(q.String())
		b.WriteString(sep)
	}
}

// internNodeSelector returns the shared instance of a pod's node selector.
func internNodeSelector(m map[string]string) map[string]string { return internMap(nodeSelectors, m) }

// internAffinity keeps of a pod's affinity the node affinity it requires, shared; none when it
// requires none.
func internAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	required := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	build := func() *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}}
	}
	key := required.String()
	if len(key) > maxShared {
		return build()
	}
	return affinities.get(key, build)
}
