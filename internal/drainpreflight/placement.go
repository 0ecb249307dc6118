package drainpreflight

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodemaint/nodemaint/internal/few"
)

// resources are amounts by resource name: CPU in millicores, the rest in units.
type resources map[corev1.ResourceName]int64

func amounts(list corev1.ResourceList) resources {
	out := make(resources, len(list))
	for name, q := range list {
		if name == corev1.ResourceCPU {
			out[name] = q.MilliValue()
		} else {
			out[name] = q.Value()
		}
	}
	return out
}

// requests are what the pod asks of a node, as the scheduler counts it (containers, init
// containers, pod-level resources, overhead), plus one pod.
func requests(pod *corev1.Pod) resources {
	r := amounts(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	r[corev1.ResourcePods]++
	return r
}

// requestsMemo remembers the requests of pods that share their containers: the cache's pods of
// one template share one instance of them (internal/cachetrim), so most of a large cluster's
// pods need not be added up again, nor leave maps behind. A pod with pod-level resources or an
// overhead is added up apart.
type requestsMemo map[containersKey]resources

// containersKey says a pod's containers and init containers by their arrays.
type containersKey struct {
	containers, initContainers *corev1.Container
	n, nInit                   int
}

func (m *requestsMemo) requests(pod *corev1.Pod) resources {
	spec := &pod.Spec
	if spec.Overhead != nil || spec.Resources != nil {
		return requests(pod)
	}
	key := containersKey{n: len(spec.Containers), nInit: len(spec.InitContainers)}
	if key.n > 0 {
		key.containers = &spec.Containers[0]
	}
	if key.nInit > 0 {
		key.initContainers = &spec.InitContainers[0]
	}
	if r, ok := (*m)[key]; ok {
		return r
	}
	if *m == nil {
		*m = requestsMemo{}
	}
	r := requests(pod)
	(*m)[key] = r
	return r
}

// placer knows where the replacements of displaced pods could go: every node's allocatable and
// what its pods leave free, as dense vectors over the resources the nodes and pods name (a
// resource a node does not list, it has none of). It does not change once made: each preflight
// places through a placement of its own (start).
type placer struct {
	// dims are the resources, sorted, and dim their indexes; cpu and memory are theirs (-1:
	// named by nothing).
	dims        []corev1.ResourceName
	dim         map[corev1.ResourceName]int
	cpu, memory int
	nodes       []*corev1.Node // every node, by name
	index       map[string]int
	// alloc and free hold node i's amounts of dims at [i*len(dims), (i+1)*len(dims)): its
	// allocatable, and what its pods' requests leave of it.
	alloc, free []int64
	// pvcs and pvs give the node affinity of a pod's persistent volumes.
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume
}

func newPlacer(c *Cluster, podsByNode map[string][]*corev1.Pod) *placer {
	p := &placer{index: make(map[string]int, len(c.Nodes)), dim: map[corev1.ResourceName]int{},
		pvcs: make(map[string]*corev1.PersistentVolumeClaim, len(c.PersistentVolumeClaims)),
		pvs:  make(map[string]*corev1.PersistentVolume, len(c.PersistentVolumes))}
	p.nodes = append(p.nodes, c.Nodes...)
	sort.Slice(p.nodes, func(i, j int) bool { return p.nodes[i].Name < p.nodes[j].Name })
	allocs := make([]resources, len(p.nodes))
	used := make([]resources, len(p.nodes))
	names := map[corev1.ResourceName]bool{}
	var memo requestsMemo
	for i, node := range p.nodes {
		p.index[node.Name] = i
		allocs[i], used[i] = amounts(node.Status.Allocatable), resources{}
		for _, pod := range podsByNode[node.Name] {
			for k, v := range memo.requests(pod) {
				used[i][k] += v
			}
		}
		for k := range allocs[i] {
			names[k] = true
		}
		for k := range used[i] {
			names[k] = true
		}
	}
	for k := range names {
		p.dims = append(p.dims, k)
	}
	sort.Slice(p.dims, func(i, j int) bool { return p.dims[i] < p.dims[j] })
	p.cpu, p.memory = -1, -1
	for i, k := range p.dims {
		p.dim[k] = i
		switch k {
		case corev1.ResourceCPU:
			p.cpu = i
		case corev1.ResourceMemory:
			p.memory = i
		}
	}
	d := len(p.dims)
	p.alloc, p.free = make([]int64, len(p.nodes)*d), make([]int64, len(p.nodes)*d)
	for i := range p.nodes {
		for k, v := range allocs[i] {
			p.alloc[i*d+p.dim[k]] = v
			p.free[i*d+p.dim[k]] += v
		}
		for k, v := range used[i] {
			p.free[i*d+p.dim[k]] -= v
		}
	}
	for _, pvc := range c.PersistentVolumeClaims {
		p.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
	}
	for _, pv := range c.PersistentVolumes {
		p.pvs[pv.Name] = pv
	}
	return p
}

// vector is what a pod asks for over the placer's dims, and the resources it asks for that no
// node and no other pod names (it fits nowhere).
func (p *placer) vector(r resources) (v []int64, missing []string) {
	v = make([]int64, len(p.dims))
	for k, n := range r {
		i, ok := p.dim[k]
		switch {
		case ok:
			v[i] = n
		case n > 0:
			missing = append(missing, string(k))
		}
	}
	sort.Strings(missing)
	return v, missing
}

// fullness is the largest share of node i's CPU and memory that its pods request.
func (p *placer) fullness(i int) float64 {
	f := 0.0
	base := i * len(p.dims)
	for _, d := range []int{p.cpu, p.memory} {
		if d < 0 {
			continue
		}
		if a := p.alloc[base+d]; a > 0 {
			f = max(f, float64(a-p.free[base+d])/float64(a))
		}
	}
	return f
}

// constraints are what keeps a pod off a node besides room, as the scheduler's filters see them
// (NodeUnschedulable, TaintToleration, NodeAffinity, VolumeBinding's node affinity of bound
// volumes). The pods of one template have the same; key says them.
type constraints struct {
	key         string
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
	// volumes are the pod's bound volumes that have a required node affinity.
	volumes []*corev1.PersistentVolume
}

func (p *placer) constraintsOf(pod *corev1.Pod) *constraints {
	c := &constraints{tolerations: pod.Spec.Tolerations, affinity: nodeaffinity.GetRequiredNodeAffinity(pod)}
	var b strings.Builder
	for _, t := range pod.Spec.Tolerations {
		seconds := "-"
		if t.TolerationSeconds != nil {
			seconds = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		fmt.Fprintf(&b, "t%q%q%q%q%s;", t.Key, t.Operator, t.Value, t.Effect, seconds)
	}
	keys := make([]string, 0, len(pod.Spec.NodeSelector))
	for k := range pod.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "s%q%q;", k, pod.Spec.NodeSelector[k])
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		fmt.Fprintf(&b, "a%q;", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.String())
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := p.pvcs[pod.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv := p.pvs[pvc.Spec.VolumeName]
		if pv == nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		c.volumes = append(c.volumes, pv)
		fmt.Fprintf(&b, "v%q;", pv.Name)
	}
	c.key = b.String()
	return c
}

// unfit says why the constraints keep a pod off the node; "" when they allow it.
func (c *constraints) unfit(node *corev1.Node) string {
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), c.tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return "cordoned"
	}
	if taint, ok := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, c.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); ok {
		return "untolerated taint " + taint.ToString()
	}
	if ok, err := c.affinity.Match(node); err != nil || !ok {
		return "not matching the pod's node selector or affinity"
	}
	for _, pv := range c.volumes {
		if ok, err := nodeaffinity.NewLazyErrorNodeSelector(pv.Spec.NodeAffinity.Required).Match(node); err != nil || !ok {
			return "volume node affinity conflict (PersistentVolume " + pv.Name + ")"
		}
	}
	return ""
}

// placement is one preflight's use of the placer, with what it learnt of the constraints of
// the pods it placed: the nodes each allows (a bit a node), and, once a pod of theirs fits
// nowhere, why each node does not.
type placement struct {
	*placer
	allowed map[string][]uint64
	why     map[string][]string
}

func (p *placer) start() *placement {
	return &placement{placer: p, allowed: map[string][]uint64{}, why: map[string][]string{}}
}

// allowedBy are the nodes the constraints allow, a bit a node.
func (p *placement) allowedBy(c *constraints) []uint64 {
	if set, ok := p.allowed[c.key]; ok {
		return set
	}
	set := make([]uint64, (len(p.nodes)+63)/64)
	for i, node := range p.nodes {
		if c.unfit(node) == "" {
			set[i/64] |= 1 << (i % 64)
		}
	}
	p.allowed[c.key] = set
	return set
}

// displaced is a pod whose replacement needs a node.
type displaced struct {
	pod         *corev1.Pod
	constraints *constraints
	want        []int64
	// missing names the resources it asks for that no node has.
	missing []string
}

// place places the replacements of the pods displaced from the nodes out, the largest first,
// each on the node with the most room left after it (as the scheduler's default
// LeastAllocated scoring would), on the nodes not out. It returns why each pod that fits
// nowhere does not, by UID.
func (p *placement) place(out []string, pods []*corev1.Pod) map[types.UID]string {
	isOut := make([]bool, len(p.nodes))
	for _, n := range out {
		isOut[p.index[n]] = true
	}
	free := append([]int64(nil), p.free...)
	sorted := make([]displaced, len(pods))
	for i, pod := range pods {
		sorted[i] = displaced{pod: pod, constraints: p.constraintsOf(pod)}
		sorted[i].want, sorted[i].missing = p.vector(requests(pod))
	}
	at := func(v []int64, d int) int64 {
		if d < 0 {
			return 0
		}
		return v[d]
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].want, sorted[j].want
		if at(a, p.cpu) != at(b, p.cpu) {
			return at(a, p.cpu) > at(b, p.cpu)
		}
		if at(a, p.memory) != at(b, p.memory) {
			return at(a, p.memory) > at(b, p.memory)
		}
		return podKeyLess(sorted[i].pod, sorted[j].pod)
	})
	d := len(p.dims)
	unplaced := map[types.UID]string{}
	outPart := fmt.Sprintf("%d out at once (%s)", len(out), few.Names(out, 3))
	for _, dp := range sorted {
		best, bestScore := -1, -1.0
		if len(dp.missing) == 0 {
			for w, word := range p.allowedBy(dp.constraints) {
				for ; word != 0; word &= word - 1 {
					i := w*64 + bits.TrailingZeros64(word)
					nodeFree := free[i*d : (i+1)*d]
					if isOut[i] || !fits(nodeFree, dp.want) {
						continue
					}
					if s := p.room(i, nodeFree, dp.want); s > bestScore {
						best, bestScore = i, s
					}
				}
			}
		}
		if best < 0 {
			unplaced[dp.pod.UID] = p.whyNot(dp, isOut, outPart, free)
			continue
		}
		for k, v := range dp.want {
			free[best*d+k] -= v
		}
	}
	return unplaced
}

// fits reports whether the free amounts have what the pod asks for: a resource it does not ask
// for is not checked, as the scheduler does.
func fits(free, want []int64) bool {
	for k, n := range want {
		if n > 0 && free[k] < n {
			return false
		}
	}
	return true
}

// insufficient names the resources the pod asks for and the free amounts do not have, sorted.
func (p *placer) insufficient(free, want []int64) []string {
	var out []string
	for k, n := range want {
		if n > 0 && free[k] < n {
			out = append(out, string(p.dims[k]))
		}
	}
	return out
}

// room is the smallest share of node i's CPU and memory left free once the pod is on it.
func (p *placer) room(i int, free, want []int64) float64 {
	score := 1.0
	base := i * len(p.dims)
	for _, d := range []int{p.cpu, p.memory} {
		if d < 0 {
			continue
		}
		if a := p.alloc[base+d]; a > 0 {
			score = min(score, float64(free[d]-want[d])/float64(a))
		}
	}
	return score
}

// whyNot says, as the scheduler's "0/N nodes are available" does, why each node cannot take the
// pod: out at once, its constraints, or too little room left.
func (p *placement) whyNot(dp displaced, isOut []bool, outPart string, free []int64) string {
	static, ok := p.why[dp.constraints.key]
	if !ok {
		static = make([]string, len(p.nodes))
		for i, node := range p.nodes {
			static[i] = dp.constraints.unfit(node)
		}
		p.why[dp.constraints.key] = static
	}
	d := len(p.dims)
	counts := map[string]int{}
	for i := range p.nodes {
		if isOut[i] {
			continue
		}
		reason := static[i]
		if reason == "" {
			short := append(p.insufficient(free[i*d:(i+1)*d], dp.want), dp.missing...)
			sort.Strings(short)
			reason = "insufficient " + strings.Join(short, ", ")
		}
		counts[reason]++
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := []string{outPart}
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return fmt.Sprintf("0/%d nodes can take it: %s", len(p.nodes), strings.Join(parts, ", "))
}
