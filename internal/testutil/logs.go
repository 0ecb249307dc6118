package testutil

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Logs records what a controller logs, for a test that needs evidence that it looked at an
// object after some moment (a later reconcile's trace): what nothing else shows when the
// controller decides to do nothing. Give the controller's manager Logs.Logger(its logger).
type Logs struct {
	mu      sync.Mutex
	entries []LogEntry
}

// LogEntry is one line logged: when, its message, and its key-value pairs, those of the
// logger's WithValues (controller-runtime's "controller", "namespace", "name" of the reconcile)
// included, rendered with %v.
type LogEntry struct {
	Time    time.Time
	Message string
	Values  map[string]string
}

// Logger returns a logger that logs to inner and records every line, whatever its verbosity.
func (l *Logs) Logger(inner logr.Logger) logr.Logger {
	return logr.New(&recordingSink{logs: l, inner: inner.GetSink()})
}

// Since returns the lines logged at or after since with the message msg whose values include
// want.
func (l *Logs) Since(since time.Time, msg string, want map[string]string) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogEntry
	for _, e := range l.entries {
		if e.Time.Before(since) || e.Message != msg {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && e.Values[k] == v
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// Reconciles are how the reconciles of the object (namespace "" when cluster-scoped) by the
// controller-runtime controller named controller ended ("success", "requeue", "error"), of those
// that started at or after since and ended, in the order they started. They are read from
// controller-runtime's own lines around each reconcile ("Reconciling", then "Reconcile
// successful", "Reconcile done, requeueing..." or "Reconciler error", with one reconcileID).
func (l *Logs) Reconciles(controller, namespace, name string, since time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var order []string
	started := map[string]bool{}
	ended := map[string]string{}
	for _, e := range l.entries {
		if e.Values["controller"] != controller || e.Values["namespace"] != namespace || e.Values["name"] != name {
			continue
		}
		id := e.Values["reconcileID"]
		switch {
		case e.Message == "Reconciling" && !e.Time.Before(since):
			started[id] = true
			order = append(order, id)
		case !started[id]:
		case e.Message == "Reconcile successful":
			ended[id] = "success"
		case strings.HasPrefix(e.Message, "Reconcile done, requeueing"):
			ended[id] = "requeue"
		case e.Message == "Reconciler error":
			ended[id] = "error"
		}
	}
	var out []string
	for _, id := range order {
		if r, ok := ended[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

func (l *Logs) record(msg string, values []any) {
	e := LogEntry{Time: time.Now(), Message: msg, Values: map[string]string{}}
	for i := 0; i+1 < len(values); i += 2 {
		e.Values[fmt.Sprint(values[i])] = fmt.Sprint(values[i+1])
	}
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
}

// recordingSink records each line and passes it on to inner (nil: nowhere).
type recordingSink struct {
	logs   *Logs
	inner  logr.LogSink
	values []any
}

func (s *recordingSink) Init(info logr.RuntimeInfo) {
	if s.inner != nil {
		s.inner.Init(logr.RuntimeInfo{CallDepth: info.CallDepth + 1})
	}
}

func (s *recordingSink) Enabled(int) bool { return true }

func (s *recordingSink) Info(level int, msg string, kv ...any) {
	s.logs.record(msg, append(slices.Clone(s.values), kv...))
	if s.inner != nil && s.inner.Enabled(level) {
		s.inner.Info(level, msg, kv...)
	}
}

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	s.logs.record(msg, append(slices.Clone(s.values), append([]any{"error", err}, kv...)...))
	if s.inner != nil {
		s.inner.Error(err, msg, kv...)
	}
}

func (s *recordingSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(slices.Clone(s.values), kv...)
	if s.inner != nil {
		c.inner = s.inner.WithValues(kv...)
	}
	return &c
}

func (s *recordingSink) WithName(name string) logr.LogSink {
	c := *s
	if s.inner != nil {
		c.inner = s.inner.WithName(name)
	}
	return &c
}
