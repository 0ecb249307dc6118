package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// PlanningResult is the idle controller again, with NodeMaintenances that stay Planning (cordon
// and drain false: nothing moves, each has a preflight in its status).
type PlanningResult struct {
	Maintenances int `json:"maintenances"`
	// NodesEach is how many nodes each selects (by name, none selected twice).
	NodesEach int `json:"nodesEach"`
	// PreflightsSeconds is from the first creation until every one had its preflight;
	// SettledSeconds until the controller's writes (the nodes' planned-maintenance taint,
	// annotation and condition, the statuses) had stopped for settleQuiet.
	PreflightsSeconds float64 `json:"preflightsSeconds"`
	SettledSeconds    float64 `json:"settledSeconds"`
	// NotSettled: the writes had not stopped after settleMax; the window was counted anyway.
	NotSettled bool `json:"notSettled,omitempty"`
	// RSSMiB is the RSS at the end of the window; PeakRSSMiB the most sampled (every second)
	// from the first creation to the end of the window; HeapInuseMiB the Go heap in use after a
	// collection, at the end.
	RSSMiB       float64 `json:"rssMiB"`
	PeakRSSMiB   float64 `json:"peakRSSMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
	HeapProfile  string  `json:"heapProfile,omitempty"`
	// CPUSeconds is the controller's CPU from the first creation to the end of the window.
	CPUSeconds float64 `json:"cpuSeconds"`
	// WindowSeconds is the window, once settled, over which RequestsPerMinute is counted;
	// IdleRequestsPerMinute is the same before any maintenance (over the idle measurement's
	// settle). By "verb resource[/subresource]", from nodemaint_api_requests_total.
	WindowSeconds         float64            `json:"windowSeconds"`
	RequestsPerMinute     map[string]float64 `json:"requestsPerMinute"`
	IdleRequestsPerMinute map[string]float64 `json:"idleRequestsPerMinute"`
	// RequestsUntilSettled are the requests from the first creation until settled.
	RequestsUntilSettled map[string]float64 `json:"requestsUntilSettled"`
	// Snapshots, Preflights and PreflightSeconds are the preflight worker's, from the first
	// creation to the end of the window (nodemaint_preflight_*).
	Snapshots        float64 `json:"snapshots"`
	Preflights       float64 `json:"preflights"`
	PreflightSeconds float64 `json:"preflightSeconds"`
}

const (
	// planningWindow is how long the requests of the controller with its Planning maintenances
	// are counted, once settled: several preflightRefresh (30s).
	planningWindow = 3 * time.Minute
	// settleQuiet is how long the controller's writes must have stopped to be settled, and
	// settleMax how long the bench waits for it at most.
	settleQuiet = 30 * time.Second
	settleMax   = 10 * time.Minute
)

// idlePlanning measures the idle controller with n NodeMaintenances that stay Planning, each
// selecting an n-th of the kwok nodes. idle0 and idle1 are the controller's metrics at the start
// and the end of the idle measurement's settle, over idle.
func (b *bench) idlePlanning(ctx context.Context, ctrl *controllerProcess, n int, idle0, idle1 controllerMetrics, idle time.Duration) (*PlanningResult, error) {
	var nodes corev1.NodeList
	if err := b.c.List(ctx, &nodes, client.MatchingLabels{localcluster.KwokNodeLabel: "fake"}); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes.Items))
	for _, node := range nodes.Items {
		names = append(names, node.Name)
	}
	slices.Sort(names)
	per := len(names) / n
	if per == 0 {
		return nil, fmt.Errorf("%d maintenances for %d nodes", n, len(names))
	}
	res := &PlanningResult{Maintenances: n, NodesEach: per, IdleRequestsPerMinute: perMinute(idle1.all, idle0.all, idle)}

	// The RSS, every second, from now to the end.
	var mu sync.Mutex
	var peakKiB int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for {
			if rss, err := procRSS(ctrl.pid()); err == nil {
				mu.Lock()
				peakKiB = max(peakKiB, rss)
				mu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	defer func() {
		stopSampling()
		sampled.Wait()
	}()

	cpu0, _, err := procStats(ctrl.pid())
	if err != nil {
		return nil, err
	}
	m0, err := ctrl.metrics(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	slog.Info("Creating Planning maintenances", "maintenances", n, "nodesEach", per)
	var created []*nodemaintv1alpha1.NodeMaintenance
	for i := range n {
		nm := &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-planned-%02d", i)},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Reason: "bench: planned, never started", NodeSelector: corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: names[i*per : (i+1)*per],
				}}}},
			}},
		}
		if err := b.c.Create(ctx, nm); err != nil {
			return nil, fmt.Errorf("creating NodeMaintenance %s: %w", nm.Name, err)
		}
		created = append(created, nm)
	}
	defer func() {
		for _, nm := range created {
			_ = b.c.Delete(context.WithoutCancel(ctx), nm)
		}
		if b.o.keep {
			_ = wait.PollUntilContextTimeout(context.WithoutCancel(ctx), 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				var list nodemaintv1alpha1.NodeMaintenanceList
				err := b.c.List(ctx, &list)
				return err == nil && len(list.Items) == 0, nil
			})
		}
	}()

	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := b.c.List(ctx, &list); err != nil {
			return false, nil
		}
		done := 0
		for _, nm := range list.Items {
			if strings.HasPrefix(nm.Name, "bench-planned-") && nm.Status.Phase == nodemaintv1alpha1.PhasePlanning && nm.Status.Preflight != nil {
				done++
			}
		}
		return done == n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("not every maintenance got its preflight: %w", err)
	}
	res.PreflightsSeconds = round(time.Since(start).Seconds())
	slog.Info("Every Planning maintenance has its preflight", "took", time.Since(start).Round(time.Second))

	// Settled: the controller's writes stopped for settleQuiet. On a loaded machine the
	// Planning writes of thousands of nodes may take longer than settleMax: the window is
	// counted then anyway, and says so.
	var settled controllerMetrics
	last, quietSince := -1.0, time.Now()
	err = wait.PollUntilContextTimeout(ctx, 5*time.Second, settleMax, true, func(ctx context.Context) (bool, error) {
		m, err := ctrl.metrics(ctx)
		if err != nil {
			return false, nil
		}
		writes := 0.0
		for _, v := range m.writes {
			writes += v
		}
		if writes != last {
			last, quietSince = writes, time.Now()
		}
		settled = m
		return time.Since(quietSince) >= settleQuiet, nil
	})
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil || settled.all == nil:
		slog.Warn("The controller's writes did not stop; counting the window anyway", "waited", settleMax)
		res.NotSettled = true
		if settled, err = ctrl.metrics(ctx); err != nil {
			return nil, err
		}
	}
	res.SettledSeconds = round(time.Since(start).Seconds())
	res.RequestsUntilSettled = diff(settled.all, m0.all)
	slog.Info("Settled; counting the requests", "window", planningWindow)

	w0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(planningWindow):
	}
	m2, err := ctrl.metrics(ctx)
	if err != nil {
		return nil, err
	}
	window := time.Since(w0)
	res.WindowSeconds = round(window.Seconds())
	res.RequestsPerMinute = perMinute(m2.all, settled.all, window)
	cpu1, _, err := procStats(ctrl.pid())
	if err != nil {
		return nil, err
	}
	res.CPUSeconds = round(cpu1 - cpu0)
	rss, err := procRSS(ctrl.pid())
	if err != nil {
		return nil, err
	}
	res.RSSMiB = round(float64(rss) / 1024)
	for metric, into := range map[string]*float64{"nodemaint_preflight_snapshots_total": &res.Snapshots, "nodemaint_preflights_total": &res.Preflights,
		"nodemaint_preflight_seconds_total": &res.PreflightSeconds} {
		*into = round(plainValue(m2.text, metric) - plainValue(m0.text, metric))
	}
	profile := fmt.Sprintf("idle-planning-heap-%d.pb.gz", n)
	inuse, err := ctrl.heapProfile(ctx, filepath.Join(b.o.out, profile))
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	res.HeapInuseMiB, res.HeapProfile = round(inuse/(1<<20)), profile
	stopSampling()
	sampled.Wait()
	res.PeakRSSMiB = round(float64(peakKiB) / 1024)
	return res, nil
}

// perMinute is the difference of two counter reads, per minute over d.
func perMinute(after, before map[string]float64, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for k, v := range diff(after, before) {
		if v != 0 {
			out[k] = round(v / d.Minutes())
		}
	}
	return out
}

// plainValue is the value of a metric without labels in an exposition; 0 without it.
func plainValue(text []byte, metric string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// requestsLine says requests per minute (or in all), the most first: "12 patch nodes, 3 get
// leases.coordination.k8s.io (14.5 in all)".
func requestsLine(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	total := 0.0
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.FormatFloat(m[k], 'f', -1, 64) + " " + k
	}
	return strings.Join(parts, ", ") + " (" + strconv.FormatFloat(round(total), 'f', -1, 64) + " in all)"
}
