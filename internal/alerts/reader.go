package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodemaint/nodemaint/internal/few"
)

const (
	// ReadTimeout bounds one read of the alerts. Nothing waits on a read but the Reader: a slow
	// Prometheus only makes the answer older, and an answer older than MaxAge closes the gate.
	ReadTimeout = 30 * time.Second
	// MaxAnswerBytes bounds the body of an answer: a larger one is not read, and closes the gate.
	// Thousands of firing alerts take a few MiB.
	MaxAnswerBytes = 8 << 20
	// maxFailure bounds the words of a failure, which a status condition and an Event carry.
	maxFailure = 512
)

// MaxAge is how old a usable answer of a Reader that reads every interval may be and still
// count: two intervals and a read late. A Prometheus that answers within ReadTimeout keeps the
// answer fresh.
func MaxAge(interval time.Duration) time.Duration { return 2*interval + ReadTimeout }

// Source is the Reader as the NodeMaintenance reconciler uses it: the last answer, at once, and a
// word on Changed each time it changes (one word may stand for several changes).
type Source interface {
	Answer() Answer
	Changed() <-chan event.TypedGenericEvent[Answer]
}

// Reader reads the firing alerts from a Prometheus server's /api/v1/alerts (or any server of its
// HTTP API) every interval, in the background, and keeps the last Answer. It is a manager
// Runnable that runs on every replica, leader or not: a replica that becomes the leader has an
// answer at hand, and its rollouts do not halt for want of one.
type Reader struct {
	endpoint string
	client   *http.Client
	interval time.Duration
	clock    clock.WithTicker

	mu      sync.RWMutex
	answer  Answer
	changed chan event.TypedGenericEvent[Answer]
}

var _ Source = (*Reader)(nil)

// NewReader reads the alerts of the Prometheus server at rawURL every interval, as clk tells
// the time (nil: the real clock).
func NewReader(rawURL string, interval time.Duration, clk clock.WithTicker) (*Reader, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q: want http:// or https:// and a host", rawURL)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("--prometheus-poll-interval %v: must be positive", interval)
	}
	u.Path = path.Join("/", u.Path, "api/v1/alerts")
	u.RawQuery, u.Fragment = "", ""
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Reader{
		endpoint: u.String(),
		client:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		interval: interval,
		clock:    clk,
		answer:   Answer{MaxAge: MaxAge(interval)},
		changed:  make(chan event.TypedGenericEvent[Answer], 1),
	}, nil
}

// Answer is the last answer, at once.
func (r *Reader) Answer() Answer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.answer
}

// Changed has a word each time the answer changes in a way that changes a gate: its alerts,
// whether it is usable, why not. It holds one word at most: a word not taken yet stands for the
// later changes too.
func (r *Reader) Changed() <-chan event.TypedGenericEvent[Answer] { return r.changed }

// NeedLeaderElection: every replica reads (see Reader).
func (*Reader) NeedLeaderElection() bool { return false }

// Start reads the alerts at once, then every interval after a read ended, until ctx ends.
func (r *Reader) Start(ctx context.Context) error {
	r.mu.Lock()
	r.answer.Asked = r.clock.Now()
	r.mu.Unlock()
	for {
		r.read(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock.After(r.interval):
		}
	}
}

// read reads the alerts once and keeps the answer; a read cut short by ctx keeps nothing.
func (r *Reader) read(ctx context.Context) {
	at := r.clock.Now()
	firing, err := r.fetch(ctx)
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	prev := r.answer
	next := prev
	if err == nil {
		next.Firing, next.At, next.FailedSince, next.Failure, next.Unreachable = firing, at, time.Time{}, "", false
	} else {
		if next.FailedSince.IsZero() {
			next.FailedSince = at
		}
		var unusable unusableError
		next.Unreachable = !errors.As(err, &unusable)
		next.Failure = few.Cut(err.Error(), maxFailure)
	}
	r.answer = next
	r.mu.Unlock()
	// An answer that had gone stale closed the gate: a new one is news even with the same alerts.
	stale := prev.FailedSince.IsZero() && !prev.At.IsZero() && r.clock.Since(prev.At) > prev.MaxAge
	if !next.same(prev) || stale {
		log.FromContext(ctx).Info("Prometheus's alerts changed", "firing", len(next.Firing), "failure", next.Failure, "unreachable", next.Unreachable)
		// One word at most waits; a newer answer takes the place of an older one not taken yet.
		select {
		case <-r.changed:
		default:
		}
		select {
		case r.changed <- event.TypedGenericEvent[Answer]{Object: next}:
		default:
		}
	}
}

// unusableError: Prometheus answered, and the answer cannot be used.
type unusableError struct{ error }

func unusable(format string, args ...any) error { return unusableError{fmt.Errorf(format, args...)} }

// envelope is the answer of Prometheus's HTTP API: its status, data, and what went wrong.
type envelope struct {
	Status    string              `json:"status"`
	Data      promv1.AlertsResult `json:"data"`
	ErrorType string              `json:"errorType"`
	Error     string              `json:"error"`
	// Warnings say the answer may be incomplete (a partial response of Thanos or Cortex, a
	// Prometheus that could not read everything): the alerts it lacks may fire.
	Warnings []string `json:"warnings"`
}

// fetch reads the firing alerts (pending ones do not count). An answer that is too large, not
// successful, or warns is unusable: the gate is closed rather than opened on part of the alerts.
func (r *Reader) fetch(ctx context.Context) ([]Alert, error) {
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", r.endpoint, err)
	}
	if len(body) > MaxAnswerBytes {
		return nil, unusable("the answer of %s is larger than %d MiB", r.endpoint, MaxAnswerBytes>>20)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, unusable("%s answered HTTP %d, not Prometheus's HTTP API: %v", r.endpoint, resp.StatusCode, err)
	}
	switch {
	case env.Status != "success" || resp.StatusCode/100 != 2:
		return nil, unusable("%s answered HTTP %d, status %q: %s %s", r.endpoint, resp.StatusCode, env.Status, env.ErrorType, env.Error)
	case len(env.Warnings) > 0:
		return nil, unusable("the answer of %s may lack alerts, it warns: %s", r.endpoint, strings.Join(env.Warnings, "; "))
	}
	var out []Alert
	for _, a := range env.Data.Alerts {
		if a.State != promv1.AlertStateFiring {
			continue
		}
		labels := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			labels[string(k)] = string(v)
		}
		out = append(out, Alert{Name: labels[model.AlertNameLabel], Labels: labels})
	}
	sortAlerts(out)
	return out, nil
}
