package preflight

import (
	"fmt"
	"sort"
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

// capacity is one node as placement sees it: what is left of its allocatable.
type capacity struct {
	node        *corev1.Node
	allocatable resources
	free        resources
}

// fullness is the largest share of the node's CPU and memory that its pods request.
func (c *capacity) fullness() float64 {
	f := 0.0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if a := c.allocatable[name]; a > 0 {
			f = max(f, float64(a-c.free[name])/float64(a))
		}
	}
	return f
}

// insufficient names the resources the pod asks for and the free amounts do not have.
func insufficient(free, want resources) []string {
	var out []string
	for name, n := range want {
		if n > 0 && free[name] < n {
			out = append(out, string(name))
		}
	}
	sort.Strings(out)
	return out
}

// placer checks where the replacements of displaced pods could go.
type placer struct {
	nodes []*capacity // every node, by name
	index map[string]int
	// pvcs and pvs give the node affinity of a pod's persistent volumes.
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume
	// static memoizes, per pod, the nodes its constraints allow (out at once or not).
	static map[types.UID][]int
}

func newPlacer(in *Input, podsByNode map[string][]*corev1.Pod) *placer {
	p := &placer{index: map[string]int{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, static: map[types.UID][]int{}}
	for i := range in.Nodes {
		node := &in.Nodes[i]
		alloc := amounts(node.Status.Allocatable)
		free := make(resources, len(alloc))
		for k, v := range alloc {
			free[k] = v
		}
		for _, pod := range podsByNode[node.Name] {
			for k, v := range requests(pod) {
				free[k] -= v
			}
		}
		p.nodes = append(p.nodes, &capacity{node: node, allocatable: alloc, free: free})
	}
	sort.Slice(p.nodes, func(i, j int) bool { return p.nodes[i].node.Name < p.nodes[j].node.Name })
	for i, c := range p.nodes {
		p.index[c.node.Name] = i
	}
	for i := range in.PersistentVolumeClaims {
		pvc := &in.PersistentVolumeClaims[i]
		p.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
	}
	for i := range in.PersistentVolumes {
		p.pvs[in.PersistentVolumes[i].Name] = &in.PersistentVolumes[i]
	}
	return p
}

// unfit says why the pod's constraints keep it off the node, as the scheduler's filters would
// (NodeUnschedulable, TaintToleration, NodeAffinity, VolumeBinding's node affinity of bound
// volumes); "" when they allow it.
func (p *placer) unfit(pod *corev1.Pod, node *corev1.Node) string {
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return "cordoned"
	}
	if taint, ok := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); ok {
		return "untolerated taint " + taint.ToString()
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return "not matching the pod's node selector or affinity"
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
		if ok, err := nodeaffinity.NewLazyErrorNodeSelector(pv.Spec.NodeAffinity.Required).Match(node); err != nil || !ok {
			return "volume node affinity conflict (PersistentVolume " + pv.Name + ")"
		}
	}
	return ""
}

// allowed are the nodes the pod's constraints allow.
func (p *placer) allowed(pod *corev1.Pod) []int {
	if idx, ok := p.static[pod.UID]; ok {
		return idx
	}
	idx := []int{}
	for i, c := range p.nodes {
		if p.unfit(pod, c.node) == "" {
			idx = append(idx, i)
		}
	}
	p.static[pod.UID] = idx
	return idx
}

// displaced is a pod whose replacement needs a node.
type displaced struct {
	pod  *corev1.Pod
	want resources
}

// place places the replacements of the displaced pods, the largest first, each on the node
// with the most room left after it (as the scheduler's default LeastAllocated scoring would),
// on the nodes not out. It returns why each pod that fits nowhere does not, by UID.
func (p *placer) place(out map[string]bool, pods []displaced) map[types.UID]string {
	free := make([]resources, len(p.nodes))
	for i, c := range p.nodes {
		free[i] = make(resources, len(c.free))
		for k, v := range c.free {
			free[i][k] = v
		}
	}
	sorted := append([]displaced(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].want, sorted[j].want
		if a[corev1.ResourceCPU] != b[corev1.ResourceCPU] {
			return a[corev1.ResourceCPU] > b[corev1.ResourceCPU]
		}
		if a[corev1.ResourceMemory] != b[corev1.ResourceMemory] {
			return a[corev1.ResourceMemory] > b[corev1.ResourceMemory]
		}
		return sorted[i].pod.Namespace+"/"+sorted[i].pod.Name < sorted[j].pod.Namespace+"/"+sorted[j].pod.Name
	})
	unplaced := map[types.UID]string{}
	for _, d := range sorted {
		best, bestScore := -1, -1.0
		for _, i := range p.allowed(d.pod) {
			if out[p.nodes[i].node.Name] || len(insufficient(free[i], d.want)) > 0 {
				continue
			}
			if s := room(p.nodes[i].allocatable, free[i], d.want); s > bestScore {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			unplaced[d.pod.UID] = p.why(d, out, free)
			continue
		}
		for k, v := range d.want {
			free[best][k] -= v
		}
	}
	return unplaced
}

// room is the smallest share of the node's CPU and memory left free once the pod is on it.
func room(alloc, free, want resources) float64 {
	score := 1.0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if a := alloc[name]; a > 0 {
			score = min(score, float64(free[name]-want[name])/float64(a))
		}
	}
	return score
}

// why says, as the scheduler's "0/N nodes are available" does, why each node cannot take the
// pod: out at once, its constraints, or too little room left.
func (p *placer) why(d displaced, out map[string]bool, free []resources) string {
	counts := map[string]int{}
	outNames := []string{}
	for i, c := range p.nodes {
		if out[c.node.Name] {
			outNames = append(outNames, c.node.Name)
			continue
		}
		reason := p.unfit(d.pod, c.node)
		if reason == "" {
			reason = "insufficient " + strings.Join(insufficient(free[i], d.want), ", ")
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
	parts := []string{fmt.Sprintf("%d out at once (%s)", len(outNames), few.Names(outNames, 3))}
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return fmt.Sprintf("0/%d nodes can take it: %s", len(p.nodes), strings.Join(parts, ", "))
}
