package alerts

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestSelected(t *testing.T) {
	firing := []Alert{
		{Name: "EtcdMembersDown", Labels: map[string]string{"severity": "critical"}},
		{Name: "KubePodCrashLooping", Labels: map[string]string{"severity": "warning", "namespace": "prod"}},
		{Name: "EtcdMembersDown", Labels: map[string]string{"severity": "critical", "instance": "b"}},
		{Name: "Watchdog", Labels: map[string]string{"severity": "none"}},
	}
	for name, tc := range map[string]struct {
		sel  nodemaintv1alpha1.AlertSelector
		want []string
	}{
		"by name":          {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping", "Absent"}}, []string{"KubePodCrashLooping"}},
		"by labels":        {nodemaintv1alpha1.AlertSelector{MatchLabels: map[string]string{"severity": "critical"}}, []string{"EtcdMembersDown"}},
		"both":             {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping"}, MatchLabels: map[string]string{"namespace": "dev"}}, nil},
		"name and a label": {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping", "Watchdog"}, MatchLabels: map[string]string{"namespace": "prod"}}, []string{"KubePodCrashLooping"}},
		"no filter":        {nodemaintv1alpha1.AlertSelector{MatchLabels: map[string]string{}}, []string{"EtcdMembersDown", "KubePodCrashLooping", "Watchdog"}},
	} {
		if got := Selected(firing, &tc.sel); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// prometheus is a stand-in Prometheus whose answer to /api/v1/alerts the test sets.
type prometheus struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	body   string
	reads  atomic.Int32
}

func newPrometheus(t *testing.T, body string) *prometheus {
	p := &prometheus{status: http.StatusOK, body: body}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prefix/api/v1/alerts" {
			http.NotFound(w, r)
			return
		}
		p.reads.Add(1)
		p.mu.Lock()
		status, body := p.status, p.body
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *prometheus) answer(status int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.body = status, body
}

const (
	etcdFiring = `{"status":"success","data":{"alerts":[
		{"labels":{"alertname":"EtcdMembersDown","severity":"critical"},"annotations":{},"state":"firing","activeAt":"2026-01-01T12:00:00Z","value":"1e+00"},
		{"labels":{"alertname":"KubePodCrashLooping"},"annotations":{},"state":"pending","activeAt":"2026-01-01T12:00:00Z","value":"1e+00"}]}}`
	noneFiring = `{"status":"success","data":{"alerts":[]}}`
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newReader(t *testing.T, p *prometheus, clk *clocktesting.FakeClock) *Reader {
	t.Helper()
	r, err := NewReader(p.URL+"/prefix/", time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// words counts the words waiting on Changed, taking them.
func words(r *Reader) int {
	n := 0
	for {
		select {
		case <-r.Changed():
			n++
		default:
			return n
		}
	}
}

// TestReaderReadsFiring: the reader keeps the firing alerts of Prometheus's answer (pending ones
// do not count) with its time; a read with the same alerts is no news, other alerts are.
func TestReaderReadsFiring(t *testing.T) {
	p := newPrometheus(t, etcdFiring)
	clk := clocktesting.NewFakeClock(t0)
	r := newReader(t, p, clk)
	if _, unknown, _ := r.Answer().Gate(t0); unknown != "no answer from Prometheus yet" {
		t.Fatalf("before the first read: %q", unknown)
	}
	r.read(t.Context())
	firing, unknown, fresh := r.Answer().Gate(t0)
	if unknown != "" {
		t.Fatalf("after the first read, the gate is unknown: %q", unknown)
	}
	if len(firing) != 1 {
		t.Fatalf("firing %+v; want EtcdMembersDown only", firing)
	}
	if firing[0].Name != "EtcdMembersDown" {
		t.Fatalf("firing %s; want EtcdMembersDown", firing[0].Name)
	}
	if got := firing[0].Labels["severity"]; got != "critical" {
		t.Errorf("EtcdMembersDown's severity %q; want its label, critical", got)
	}
	if want := t0.Add(2*time.Second + ReadTimeout); !fresh.Equal(want) {
		t.Errorf("fresh until %v, want %v", fresh, want)
	}
	if n := words(r); n != 1 {
		t.Errorf("%d words on Changed after the first answer, want 1", n)
	}
	clk.Step(time.Second)
	r.read(t.Context())
	if n := words(r); n != 0 {
		t.Errorf("%d words on Changed after the same answer, want none", n)
	}
	if _, _, fresh := r.Answer().Gate(clk.Now()); !fresh.Equal(clk.Now().Add(2*time.Second + ReadTimeout)) {
		t.Errorf("the same answer read again does not count longer: fresh until %v", fresh)
	}
	p.answer(http.StatusOK, noneFiring)
	r.read(t.Context())
	firing, unknown, _ = r.Answer().Gate(clk.Now())
	if unknown != "" {
		t.Errorf("cleared: unknown %q; want an answer", unknown)
	}
	if len(firing) != 0 {
		t.Errorf("cleared: firing %v; want none", firing)
	}
	if n := words(r); n != 1 {
		t.Errorf("cleared: %d words on Changed; want 1", n)
	}
	// The answer ages past MaxAge (a read that took long): stale, the gate is closed; the next
	// answer, with the same alerts, opens it and is news.
	clk.Step(r.Answer().MaxAge + time.Second)
	if _, unknown, _ := r.Answer().Gate(clk.Now()); !strings.HasPrefix(unknown, "Prometheus's last answer, asked at 2026-01-01T12:00:01Z, is older than 32s") {
		t.Errorf("stale: %q", unknown)
	}
	r.read(t.Context())
	if _, unknown, _ := r.Answer().Gate(clk.Now()); unknown != "" {
		t.Errorf("answered after stale: %q, want open", unknown)
	}
	if n := words(r); n != 1 {
		t.Errorf("answered after stale: %d words on Changed; want 1", n)
	}
	if p.reads.Load() != 4 {
		t.Errorf("%d reads, want 4", p.reads.Load())
	}
}

// TestReaderFailsClosed: every answer the reader cannot trust closes the gate, whatever it last
// knew, and says why and since when: an answer larger than MaxAnswerBytes, one with warnings (a
// partial answer), an error, one that is not Prometheus's, no answer at all. A usable answer
// opens it again.
func TestReaderFailsClosed(t *testing.T) {
	huge := `{"status":"success","data":{"alerts":[` + strings.Repeat(`{"labels":{"alertname":"Filler"},"state":"firing","activeAt":"2026-01-01T12:00:00Z","value":"1"},`, MaxAnswerBytes/80) +
		`{"labels":{"alertname":"Filler"},"state":"firing","activeAt":"2026-01-01T12:00:00Z","value":"1"}]}}`
	if len(huge) <= MaxAnswerBytes {
		t.Fatalf("the huge answer has %d bytes, not more than %d", len(huge), MaxAnswerBytes)
	}
	for name, tc := range map[string]struct {
		status      int
		body        string
		unreachable bool
		want        string
	}{
		"too large": {http.StatusOK, huge, false, "is larger than 8 MiB"},
		"warnings": {http.StatusOK, `{"status":"success","warnings":["partial response: store gateway unavailable"],"data":{"alerts":[]}}`, false,
			"may lack alerts, it warns: partial response: store gateway unavailable"},
		"error":          {http.StatusServiceUnavailable, `{"status":"error","errorType":"unavailable","error":"too many requests"}`, false, `answered HTTP 503, status "error": unavailable too many requests`},
		"not successful": {http.StatusOK, `{"status":"pending","data":{"alerts":[]}}`, false, `status "pending"`},
		"not Prometheus": {http.StatusOK, `<html>login</html>`, false, "not Prometheus's HTTP API"},
		"gone":           {0, "", true, "connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPrometheus(t, noneFiring)
			clk := clocktesting.NewFakeClock(t0)
			r := newReader(t, p, clk)
			r.read(t.Context())
			if _, unknown, _ := r.Answer().Gate(clk.Now()); unknown != "" {
				t.Fatalf("the first answer: %q", unknown)
			}
			words(r)
			clk.Step(time.Second)
			failedAt := clk.Now()
			if tc.status == 0 {
				p.Close()
			} else {
				p.answer(tc.status, tc.body)
			}
			r.read(t.Context())
			firing, unknown, fresh := r.Answer().Gate(clk.Now())
			what := "Prometheus's answers unusable since 2026-01-01T12:00:01Z: "
			if tc.unreachable {
				what = "Prometheus unreachable since 2026-01-01T12:00:01Z: "
			}
			if !strings.HasPrefix(unknown, what) {
				t.Fatalf("gate: unknown %q; want it to start %q", unknown, what)
			}
			if !strings.Contains(unknown, tc.want) {
				t.Fatalf("gate: unknown %q; want it to say %q", unknown, tc.want)
			}
			if firing != nil {
				t.Errorf("gate closed: firing %v; want none", firing)
			}
			if !fresh.IsZero() {
				t.Errorf("gate closed: fresh until %v; want zero", fresh)
			}
			if len(unknown) > 700 {
				t.Errorf("unknown has %d bytes: unbounded", len(unknown))
			}
			if words(r) != 1 {
				t.Error("no word on Changed when the gate closed")
			}
			// Failing on, the gate stays closed since the first failure, with no news.
			clk.Step(time.Second)
			r.read(t.Context())
			if _, again, _ := r.Answer().Gate(clk.Now()); again != unknown {
				t.Errorf("failing again: %q, want %q", again, unknown)
			}
			if n := words(r); n != 0 {
				t.Errorf("failing again: %d words on Changed; want none", n)
			}
			if since := r.Answer().FailedSince; !since.Equal(failedAt) {
				t.Errorf("failing again: failed since %v; want the first failure, %v", since, failedAt)
			}
			if tc.status == 0 {
				return
			}
			p.answer(http.StatusOK, etcdFiring)
			r.read(t.Context())
			firing, unknown, _ = r.Answer().Gate(clk.Now())
			if unknown != "" {
				t.Errorf("answered again: unknown %q; want an answer", unknown)
			}
			if len(firing) != 1 {
				t.Errorf("answered again: firing %v; want EtcdMembersDown", firing)
			}
			if n := words(r); n != 1 {
				t.Errorf("answered again: %d words on Changed; want 1", n)
			}
		})
	}
}

// TestGate decides, purely, from an answer and the time, whether the alerts can be told.
func TestGate(t *testing.T) {
	const maxAge = time.Minute
	firing := []Alert{{Name: "NodeDown"}}
	for name, tc := range map[string]struct {
		a         Answer
		now       time.Time
		unknown   string
		freshLeft time.Duration
	}{
		"not started": {Answer{MaxAge: maxAge}, t0, "no answer from Prometheus yet", 0},
		"asked":       {Answer{Asked: t0, MaxAge: maxAge}, t0.Add(time.Hour), "no answer from Prometheus yet, asked at 2026-01-01T12:00:00Z", 0},
		"fresh":       {Answer{Asked: t0, Firing: firing, At: t0, MaxAge: maxAge}, t0.Add(maxAge), "", maxAge},
		"stale": {Answer{Asked: t0, Firing: firing, At: t0, MaxAge: maxAge}, t0.Add(maxAge + time.Nanosecond),
			"Prometheus's last answer, asked at 2026-01-01T12:00:00Z, is older than 1m0s: no read finished since", 0},
		"unreachable": {Answer{Asked: t0, Firing: firing, At: t0, FailedSince: t0.Add(time.Second), Failure: "connection refused", Unreachable: true, MaxAge: maxAge}, t0.Add(2 * time.Second),
			"Prometheus unreachable since 2026-01-01T12:00:01Z: connection refused", 0},
		"unusable": {Answer{Asked: t0, FailedSince: t0, Failure: "it warns", MaxAge: maxAge}, t0,
			"Prometheus's answers unusable since 2026-01-01T12:00:00Z: it warns", 0},
	} {
		got, unknown, fresh := tc.a.Gate(tc.now)
		if unknown != tc.unknown {
			t.Errorf("%s: unknown %q, want %q", name, unknown, tc.unknown)
		}
		if tc.unknown == "" {
			if len(got) != 1 {
				t.Errorf("%s: firing %v, want the one alert", name, got)
			}
			if want := tc.a.At.Add(tc.freshLeft); !fresh.Equal(want) {
				t.Errorf("%s: fresh until %v, want %v", name, fresh, want)
			}
		} else {
			if got != nil {
				t.Errorf("%s: firing %v, want none", name, got)
			}
			if !fresh.IsZero() {
				t.Errorf("%s: fresh until %v, want never", name, fresh)
			}
		}
	}
}

// FuzzGate: the gate tells alerts only from a usable answer no older than MaxAge, and then says
// until when; otherwise it tells why not, and no alerts.
func FuzzGate(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(60), int64(10), false, "")
	f.Add(int64(1), int64(5), int64(0), int64(60), int64(100), false, "")
	f.Add(int64(1), int64(5), int64(7), int64(60), int64(8), true, "refused")
	f.Fuzz(func(t *testing.T, asked, at, failed, maxAge, now int64, unreachable bool, failure string) {
		sec := func(s int64) time.Time {
			if s == 0 {
				return time.Time{}
			}
			return t0.Add(time.Duration(s%1e6) * time.Second)
		}
		a := Answer{Asked: sec(asked), At: sec(at), FailedSince: sec(failed), Failure: failure, Unreachable: unreachable,
			MaxAge: time.Duration(maxAge%1e5) * time.Second, Firing: []Alert{{Name: "NodeDown"}}}
		n := t0.Add(time.Duration(now%1e6) * time.Second)
		firing, unknown, fresh := a.Gate(n)
		f2, u2, fr2 := a.Gate(n)
		if fmt.Sprint(firing, unknown, fresh) != fmt.Sprint(f2, u2, fr2) {
			t.Fatal("Gate is not deterministic")
		}
		open := !a.At.IsZero() && a.FailedSince.IsZero() && n.Sub(a.At) <= a.MaxAge
		if open != (unknown == "") {
			t.Fatalf("answer %+v at %v: unknown %q", a, n, unknown)
		}
		if open {
			if len(firing) != 1 {
				t.Fatalf("open: firing %v, want the answer's one alert", firing)
			}
			if fresh.Before(n) {
				t.Fatalf("open: fresh until %v, before now %v", fresh, n)
			}
			if want := a.At.Add(a.MaxAge); !fresh.Equal(want) {
				t.Fatalf("open: fresh until %v, want %v", fresh, want)
			}
		} else {
			if firing != nil {
				t.Fatalf("closed (%s): firing %v, want none", unknown, firing)
			}
			if !fresh.IsZero() {
				t.Fatalf("closed (%s): fresh until %v, want never", unknown, fresh)
			}
		}
	})
}

// hanging is a stand-in Prometheus that accepts every request and answers none until the test
// ends.
func hanging(t *testing.T) (url string, received <-chan struct{}) {
	got := make(chan struct{}, 100)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL, got
}

// TestReaderNeverWaits: while a read hangs, the answer is at hand at once and closes the gate;
// the reader stops with its context.
func TestReaderNeverWaits(t *testing.T) {
	url, received := hanging(t)
	clk := clocktesting.NewFakeClock(t0)
	r, err := NewReader(url, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error)
	go func() { stopped <- r.Start(ctx) }()
	<-received
	if _, unknown, _ := r.Answer().Gate(clk.Now()); unknown != "no answer from Prometheus yet, asked at 2026-01-01T12:00:00Z" {
		t.Errorf("while the first read hangs: %q", unknown)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if _, unknown, _ := r.Answer().Gate(clk.Now()); !strings.HasPrefix(unknown, "no answer from Prometheus yet") {
		t.Errorf("a read cut short by the end is kept: %q", unknown)
	}
	if n := words(r); n != 0 {
		t.Errorf("a read cut short by the end: %d words on Changed; want none", n)
	}
}

// TestReaderPolls: the reader reads at once, then every interval after a read ended, and says on
// Changed when the answer changes.
func TestReaderPolls(t *testing.T) {
	p := newPrometheus(t, noneFiring)
	clk := clocktesting.NewFakeClock(t0)
	r := newReader(t, p, clk)
	go func() { _ = r.Start(t.Context()) }()
	<-r.Changed()
	firing, unknown, _ := r.Answer().Gate(clk.Now())
	if unknown != "" {
		t.Fatalf("first answer: unknown %q; want a usable answer", unknown)
	}
	if len(firing) != 0 {
		t.Fatalf("first answer: firing %v; want none", firing)
	}
	p.answer(http.StatusOK, etcdFiring)
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	clk.Step(time.Second)
	<-r.Changed()
	firing, unknown, _ = r.Answer().Gate(clk.Now())
	if unknown != "" {
		t.Fatalf("second answer: unknown %q; want a usable answer", unknown)
	}
	if len(firing) != 1 {
		t.Fatalf("second answer: firing %v; want one alert", firing)
	}
	if p.reads.Load() != 2 {
		t.Errorf("%d reads, want 2", p.reads.Load())
	}
}

func TestNewReaderRefuses(t *testing.T) {
	for _, u := range []string{"", "prometheus:9090", "ftp://prometheus", "http://", "http://[::1"} {
		if _, err := NewReader(u, time.Second, nil); err == nil {
			t.Errorf("NewReader(%q) accepted", u)
		}
	}
	if _, err := NewReader("http://prometheus:9090", 0, nil); err == nil {
		t.Error("an interval of 0 accepted")
	}
}
