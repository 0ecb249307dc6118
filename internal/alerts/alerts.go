// Package alerts reads the Prometheus alerts that firing halt a rollout
// (spec.rollout.haltOnAlerts), as kured's --prometheus-url and alert filter do for reboots:
// Selected picks, purely, the alerts a maintenance selects; Prometheus reads the firing ones.
package alerts

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/utils/clock"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Alert is a firing alert: its name (the alertname label) and its labels.
type Alert struct {
	Name   string
	Labels map[string]string
}

// Selected names the alerts the selector selects, sorted, each once.
func Selected(firing []Alert, sel *nodemaintv1alpha1.AlertSelector) []string {
	var out []string
	for _, a := range firing {
		if len(sel.AlertNames) > 0 && !slices.Contains(sel.AlertNames, a.Name) {
			continue
		}
		matches := true
		for k, v := range sel.MatchLabels {
			matches = matches && a.Labels[k] == v
		}
		if matches {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Source tells the firing alerts.
type Source interface {
	Firing(ctx context.Context) ([]Alert, error)
}

// Prometheus reads the firing alerts from a Prometheus server's /api/v1/alerts, and answers from
// its last read for up to Fresh: every NodeMaintenance of a rollout that waits asks at each of
// its reconciles, and one read serves them all.
type Prometheus struct {
	api   promv1.API
	fresh time.Duration
	clock clock.PassiveClock

	mu     sync.Mutex
	readAt time.Time
	alerts []Alert
	err    error
}

// queryTimeout bounds one read of the alerts.
const queryTimeout = 10 * time.Second

// NewPrometheus reads the alerts of the Prometheus server at url, at most once per fresh as clk
// tells the time (nil: the real clock).
func NewPrometheus(url string, fresh time.Duration, clk clock.PassiveClock) (*Prometheus, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", url, err)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Prometheus{api: promv1.NewAPI(c), fresh: fresh, clock: clk}, nil
}

// Firing returns the alerts firing now (pending ones do not count).
func (p *Prometheus) Firing(ctx context.Context) ([]Alert, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.clock.Now(); p.readAt.IsZero() || now.Sub(p.readAt) >= p.fresh {
		p.alerts, p.err = p.read(ctx)
		p.readAt = now
	}
	return p.alerts, p.err
}

func (p *Prometheus) read(ctx context.Context) ([]Alert, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	res, err := p.api.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the alerts from Prometheus: %w", err)
	}
	var out []Alert
	for _, a := range res.Alerts {
		if a.State != promv1.AlertStateFiring {
			continue
		}
		labels := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			labels[string(k)] = string(v)
		}
		out = append(out, Alert{Name: labels[model.AlertNameLabel], Labels: labels})
	}
	return out, nil
}
