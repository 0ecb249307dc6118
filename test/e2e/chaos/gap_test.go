package chaos_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
)

// TestCheckerSeesBreachHiddenInGap breaks the checker's watches (and only the checker's: it
// talks to the API server through a proxy the test cuts), deletes the only pod of a
// surge-capable Deployment whose budget wants 1 (a voluntary disruption past the budget), waits
// until its replacement is Ready, and lets the checker reconnect: the cluster looks fine again
// by then, and the checker must still report the breach, dated inside the gap.
func TestCheckerSeesBreachHiddenInGap(t *testing.T) {
	if loadTest {
		t.Skip("NODEMAINT_E2E_LOAD runs the load test only")
	}
	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 1)
	d.Spec.Template.Annotations = podDelays
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: d.Spec.Selector, MinAvailable: ptr.To(intstr.FromInt32(1))}}
	if err := c.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	framework.CreateDeployment(t, d)

	config := framework.Cluster().RESTConfig()
	proxy := startProxy(t, config.Host)
	config.Host = proxy.url
	checker, err := invariants.Start(ctx, config, framework.CheckerOptions(invariants.Options{Namespaces: []string{ns}, Witness: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := checker.Stop(); err != nil {
			t.Errorf("stopping the invariant checker: %v", err)
		}
	})
	testutil.Eventually(t, time.Minute, "the checker checks the budget and the Deployment", func(context.Context) (bool, string, error) {
		budgets, deployments := checker.Watched()
		return budgets == 1 && deployments == 1, "", nil
	})
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of web: %d, %v", len(pods.Items), err)
	}
	old := pods.Items[0]
	testutil.Eventually(t, time.Minute, "the witness finalizer on "+old.Name, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(&old), &old)
		return slices.Contains(old.Finalizers, invariants.WitnessFinalizer), "", err
	})

	proxy.cut()
	t.Logf("the checker's connections cut; deleting %s", old.Name)
	if err := c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	var readyAt time.Time
	testutil.Eventually(t, time.Minute, "a replacement Ready", func(ctx context.Context) (bool, string, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for _, p := range list.Items {
			if p.Name != old.Name && p.DeletionTimestamp == nil && podutils.IsPodReady(&p) {
				readyAt = readySince(&p)
				return true, "", nil
			}
		}
		return false, "", nil
	})
	// Past the second of the replacement's Ready condition (its lastTransitionTime has seconds).
	testutil.Eventually(t, 5*time.Second, "past the second of the replacement's Ready condition", func(context.Context) (bool, string, error) {
		now := time.Now().Truncate(time.Second)
		return now.After(readyAt), fmt.Sprintf("now %v, Ready at %v", now, readyAt), nil
	})
	if v := checker.Violations(); len(v) > 0 {
		t.Fatalf("violations while the checker's watches were cut: %v", v)
	}
	proxy.restore()
	t.Logf("the checker's connections restored")

	var got []invariants.Violation
	testutil.Eventually(t, time.Minute, "the breach reported after the gap", func(context.Context) (bool, string, error) {
		got = checker.Violations()
		return len(got) >= 2, "", nil
	})
	gaps, _ := checker.Gaps()
	for _, v := range got {
		t.Logf("found: %s", v)
		if !v.AfterWatchGap {
			t.Errorf("violation %s: not reconstructed after the gap", v)
		}
		if v.Pod != ns+"/"+old.Name {
			t.Errorf("violation %s: pod %s, want %s's leaving", v, v.Pod, old.Name)
		}
		if v.Healthy != 0 || v.Want != 1 {
			t.Errorf("violation %s: %d healthy of %d wanted, want 0 of 1", v, v.Healthy, v.Want)
		}
	}
	if gaps == 0 {
		t.Errorf("no watch gap replayed")
	}
}

// readySince is when the pod's Ready condition last changed.
func readySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// proxy forwards TCP connections to the API server until cut: then it closes them all and
// closes every new one at once (the client sees its connection reset, not refused, so its
// informers list again), until restored.
type proxy struct {
	url string

	mu    sync.Mutex
	cutOn bool
	conns map[net.Conn]bool
}

func startProxy(t *testing.T, host string) *proxy {
	t.Helper()
	target, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "https://" + l.Addr().String(), conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		l.Close()
		p.cut()
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cutOn {
				p.mu.Unlock()
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", target.Host)
			if err != nil {
				p.mu.Unlock()
				in.Close()
				continue
			}
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOn = true
	for conn := range p.conns {
		conn.Close()
	}
	clear(p.conns)
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOn = false
}
