package invariants

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// read reads the stand-in's alerts as the controller's alert reader does, and says what it got.
func read(t *testing.T, p *Prometheus) string {
	t.Helper()
	resp, err := http.Get(p.URL() + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gated is a rollout over node-1 and node-2 that halts on NodeDown alerts of severity critical,
// created at created; turns (node → since) are in its status.
func gated(created time.Time, gen int64, turns map[string]time.Time) *nodemaintv1alpha1.NodeMaintenance {
	nm := newNM("gated", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Release: nodemaintv1alpha1.ReleaseManual,
			HaltOnAlerts: &nodemaintv1alpha1.AlertSelector{AlertNames: []string{"NodeDown"}, MatchLabels: map[string]string{"severity": "critical"}}}
	})
	nm.Generation, nm.CreationTimestamp = gen, metav1.NewTime(created.Truncate(time.Second))
	if turns != nil {
		nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{}
		for node, since := range turns {
			nm.Status.Rollout.InTurn = append(nm.Status.Rollout.InTurn, nodemaintv1alpha1.NodeTurn{Name: node, Since: metav1.NewTime(since.Truncate(time.Second))})
		}
	}
	return nm
}

// TestAlertGate: a controller that starts a node's turn while a selected alert fires (it ignores
// the gate), on an answer with warnings, or with no answer at all (it fails open) breaches the
// alert gate; one that starts it on a usable answer without the alerts, or whose turn started
// before the rollout waited on alerts, does not. Each turn is judged once.
func TestAlertGate(t *testing.T) {
	const maxAge = 32 * time.Second
	for name, tc := range map[string]struct {
		// serve prepares the stand-in and reads it as the controller would.
		serve func(t *testing.T, p *Prometheus)
		// gen 2 and a turn before the checker saw haltOnAlerts: added to a running rollout.
		before bool
		want   int
	}{
		"ignores a firing alert": {serve: func(t *testing.T, p *Prometheus) {
			p.Fire("NodeDown", map[string]string{"severity": "critical"})
			if body := read(t, p); !strings.Contains(body, `"NodeDown"`) {
				t.Fatalf("the stand-in answered %s", body)
			}
		}, want: 1},
		"fails open on warnings": {serve: func(t *testing.T, p *Prometheus) {
			p.Answer(AnswerWarnings)
			if body := read(t, p); !strings.Contains(body, `"warnings"`) {
				t.Fatalf("the stand-in answered %s", body)
			}
		}, want: 1},
		"fails open without an answer": {serve: func(t *testing.T, p *Prometheus) { p.Answer(AnswerNothing) }, want: 1},
		"an alert the rollout does not select": {serve: func(t *testing.T, p *Prometheus) {
			p.Fire("NodeDown", map[string]string{"severity": "warning"})
			p.Fire("Watchdog", map[string]string{"severity": "critical"})
			read(t, p)
		}, want: 0},
		"cleared before the turn": {serve: func(t *testing.T, p *Prometheus) {
			p.Fire("NodeDown", map[string]string{"severity": "critical"})
			read(t, p)
			p.Clear("NodeDown")
			read(t, p)
		}, want: 0},
		"the turn started before the gate": {serve: func(t *testing.T, p *Prometheus) {
			p.Fire("NodeDown", map[string]string{"severity": "critical"})
			read(t, p)
		}, before: true, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			p := StartPrometheus()
			defer p.Close()
			tc.serve(t, p)
			s := newState(nil)
			s.alertGate = newAlertGate(p, maxAge)
			now := time.Now()
			created, gen := now, int64(1)
			if tc.before {
				created, gen = now.Add(-time.Hour), 2
			}
			turnAt := now.Add(time.Second)
			if tc.before {
				turnAt = now.Add(-time.Minute)
			}
			s.alertTurns(gated(created, gen, nil), false, now)
			s.alertTurns(gated(created, gen, map[string]time.Time{"node-1": turnAt}), false, turnAt.Add(time.Second))
			// The same turn seen again (a status write, a relist): judged once.
			s.alertTurns(gated(created, gen, map[string]time.Time{"node-1": turnAt}), false, turnAt.Add(2*time.Second))
			if len(s.violations) != tc.want {
				t.Fatalf("%d violations, want %d: %v", len(s.violations), tc.want, s.violations)
			}
			for _, v := range s.violations {
				if v.Kind != KindAlertGate {
					t.Errorf("violation %s: kind %s, want %s", v, v.Kind, KindAlertGate)
				}
				if v.Object != "gated" {
					t.Errorf("violation %s: object %s, want gated", v, v.Object)
				}
				if !strings.Contains(v.String(), "node node-1 started its turn") {
					t.Errorf("violation %s: does not say node node-1 started its turn", v)
				}
			}
		})
	}
}
