package invariants

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// KindAlertGate: a node started its turn of a rollout with spec.rollout.haltOnAlerts though no
// usable answer the stand-in Prometheus (Options.Prometheus) served from Options.AlertMaxAge
// before the turn until the checker saw it had none of the alerts the rollout selects firing:
// the rollout went on while they fired, or without a trustworthy answer (the gate must fail
// closed).
const KindAlertGate = "AlertGate"

// Answering is how the stand-in Prometheus answers.
type Answering int

const (
	// AnswerAlerts answers with the firing alerts: a usable answer.
	AnswerAlerts Answering = iota
	// AnswerWarnings answers with the firing alerts and a warning, as a partial answer of Thanos
	// or Cortex does: not usable, the alerts it lacks may fire.
	AnswerWarnings
	// AnswerNothing accepts the requests and never answers: a blackholed Prometheus.
	AnswerNothing
)

// Prometheus is a stand-in Prometheus server the test controls: it answers /api/v1/alerts with
// the alerts the test set firing, as Answering says, and remembers what it answered and when, so
// that the checker can judge the rollouts' turns against what nodemaint could know.
type Prometheus struct {
	srv     *httptest.Server
	release chan struct{}

	mu        sync.Mutex
	firing    map[string]map[string]string
	answering Answering
	// served are the answers given, those alike joined: from first to last; answers counts them.
	served  []servedAnswer
	answers int
}

type servedAnswer struct {
	first, last time.Time
	firing      map[string]map[string]string
	usable      bool
}

// StartPrometheus starts a stand-in Prometheus that answers with no alert firing.
func StartPrometheus() *Prometheus {
	p := &Prometheus{release: make(chan struct{}), firing: map[string]map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the stand-in's address, for --prometheus-url.
func (p *Prometheus) URL() string { return p.srv.URL }

// Close stops the stand-in, letting the requests it holds go.
func (p *Prometheus) Close() {
	close(p.release)
	p.srv.Close()
}

// Fire makes the alert fire with the labels (and alertname); Clear ends it.
func (p *Prometheus) Fire(name string, labels map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l["alertname"] = name
	p.firing[name] = l
}

// Clear ends the alert.
func (p *Prometheus) Clear(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.firing, name)
}

// Answer sets how the stand-in answers from now on.
func (p *Prometheus) Answer(a Answering) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answering = a
}

// Served counts the answers the stand-in gave, usable or not: a test can assert that it was
// read.
func (p *Prometheus) Served() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answers
}

func (p *Prometheus) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/alerts" {
		http.NotFound(w, r)
		return
	}
	p.mu.Lock()
	answering := p.answering
	if answering == AnswerNothing {
		p.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-p.release:
		}
		return
	}
	type alert struct {
		Labels   map[string]string `json:"labels"`
		State    string            `json:"state"`
		ActiveAt time.Time         `json:"activeAt"`
		Value    string            `json:"value"`
	}
	body := struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings,omitempty"`
		Data     struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}{Status: "success"}
	body.Data.Alerts = []alert{}
	for _, name := range slices.Sorted(maps.Keys(p.firing)) {
		body.Data.Alerts = append(body.Data.Alerts, alert{Labels: p.firing[name], State: "firing", ActiveAt: time.Now().UTC(), Value: "1"})
	}
	if answering == AnswerWarnings {
		body.Warnings = []string{"partial response: a store did not answer"}
	}
	p.record(servedAnswer{first: time.Now(), firing: maps.Clone(p.firing), usable: answering == AnswerAlerts})
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// record remembers an answer, joined to the last when alike. p.mu is held.
func (p *Prometheus) record(a servedAnswer) {
	p.answers++
	a.last = a.first
	if n := len(p.served); n > 0 {
		last := &p.served[n-1]
		if last.usable == a.usable && maps.EqualFunc(last.firing, a.firing, maps.Equal) {
			last.last = a.first
			return
		}
	}
	p.served = append(p.served, a)
}

// clearBetween reports whether a usable answer the stand-in gave between from and to had none of
// the alerts the selector selects firing.
func (p *Prometheus) clearBetween(sel *nodemaintv1alpha1.AlertSelector, from, to time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.served {
		if !a.usable || a.last.Before(from) || a.first.After(to) {
			continue
		}
		if len(selectedFiring(a.firing, sel)) == 0 {
			return true
		}
	}
	return false
}

// selectedFiring names the firing alerts the selector selects: those named in alertNames (any
// name when none) that carry every label of matchLabels.
func selectedFiring(firing map[string]map[string]string, sel *nodemaintv1alpha1.AlertSelector) []string {
	var out []string
	for name, labels := range firing {
		if len(sel.AlertNames) > 0 && !slices.Contains(sel.AlertNames, name) {
			continue
		}
		match := true
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// alertGate is the state of the alert gate's check.
type alertGate struct {
	prom   *Prometheus
	maxAge time.Duration
	// gatedSince is when each maintenance's rollout began to wait on alerts as the checker
	// knows: its creation when created so, else when the checker saw haltOnAlerts.
	gatedSince map[string]time.Time
	// judged are the turns seen (maintenance/node/since); turns counts those judged.
	judged map[string]bool
	turns  int
}

func newAlertGate(prom *Prometheus, maxAge time.Duration) *alertGate {
	return &alertGate{prom: prom, maxAge: maxAge, gatedSince: map[string]time.Time{}, judged: map[string]bool{}}
}

// alertTurns judges the turns the maintenance's status shows started, once each: a turn of a
// rollout that waits on alerts needs an answer that let it go (see KindAlertGate).
func (s *state) alertTurns(nm *nodemaintv1alpha1.NodeMaintenance, deleted bool, now time.Time) {
	g := s.alertGate
	if g == nil {
		return
	}
	var sel *nodemaintv1alpha1.AlertSelector
	if nm.Spec.Rollout != nil {
		sel = nm.Spec.Rollout.HaltOnAlerts
	}
	if deleted || sel == nil {
		delete(g.gatedSince, nm.Name)
		return
	}
	since, ok := g.gatedSince[nm.Name]
	if !ok {
		since = now
		if nm.Generation == 1 {
			since = nm.CreationTimestamp.Time
		}
		g.gatedSince[nm.Name] = since
	}
	if nm.Status.Rollout == nil {
		return
	}
	for _, turn := range nm.Status.Rollout.InTurn {
		key := fmt.Sprintf("%s/%s/%d", nm.Name, turn.Name, turn.Since.Unix())
		if g.judged[key] {
			continue
		}
		g.judged[key] = true
		if turn.Since.Time.Before(since) {
			continue // it started before the rollout waited on alerts
		}
		g.turns++
		if from := turn.Since.Add(-g.maxAge); !g.prom.clearBetween(sel, from, now) {
			s.emit(Violation{Time: now, Kind: KindAlertGate, Object: nm.Name, Detail: fmt.Sprintf(
				"node %s started its turn at %s, but no usable answer of Prometheus from %s to %s had none of the alerts %s firing",
				turn.Name, turn.Since.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339Nano), describeSelector(sel))})
		}
	}
}

func describeSelector(sel *nodemaintv1alpha1.AlertSelector) string {
	var parts []string
	if len(sel.AlertNames) > 0 {
		parts = append(parts, "named "+strings.Join(sel.AlertNames, "|"))
	}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		parts = append(parts, k+"="+sel.MatchLabels[k])
	}
	return strings.Join(parts, ", ")
}

// AlertTurns counts the turns of rollouts with haltOnAlerts the checker judged: a test can
// assert that it judged some.
func (c *Checker) AlertTurns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.alertGate == nil {
		return 0
	}
	return c.state.alertGate.turns
}
