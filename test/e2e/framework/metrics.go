package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

// MetricsTarget is how to reach a controller's metrics endpoint. ScrapeMetrics and the scrape
// configuration of StartPrometheus are built from it alone: the scheme and credentials of the
// endpoint are known here and nowhere else.
type MetricsTarget struct {
	// Scheme is http or https; Address is host:port; Path is /metrics.
	Scheme, Address, Path string
}

// MetricsTarget returns the controller's metrics endpoint.
func (c *Controller) MetricsTarget() MetricsTarget {
	return MetricsTarget{Scheme: "https", Address: c.metricsAddr, Path: "/metrics"}
}

// scrapeConfig is the Prometheus scrape_config of the target, under the job name, as a cluster's
// Prometheus scrapes the controller: over HTTPS (the self-signed certificate not verified) with
// the bearer token in tokenFile (MetricsReaderToken).
func (m MetricsTarget) scrapeConfig(job, tokenFile string) map[string]any {
	return map[string]any{
		"job_name":        job,
		"scheme":          m.Scheme,
		"metrics_path":    m.Path,
		"scrape_interval": "1s",
		"scrape_timeout":  "1s",
		"static_configs":  []any{map[string]any{"targets": []string{m.Address}}},
		"tls_config":      map[string]any{"insecure_skip_verify": true},
		"authorization":   map[string]any{"credentials_file": tokenFile},
	}
}

// Metrics are the metric families of one scrape, by name.
type Metrics map[string]*dto.MetricFamily

// ScrapeMetrics reads the target's metrics once.
func ScrapeMetrics(ctx context.Context, target MetricsTarget) (Metrics, error) {
	resp, err := GetMetrics(target.Scheme + "://" + target.Address)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	return Metrics(families), err
}

// Value sums the samples of the metric name whose labels include labels: a counter's or gauge's
// value, a histogram's count. ok is false when no sample matches.
func (m Metrics) Value(name string, labels map[string]string) (sum float64, ok bool) {
	f := m[name]
	if f == nil {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		matched := 0
		for _, l := range s.GetLabel() {
			if v, want := labels[l.GetName()]; want && v == l.GetValue() {
				matched++
			}
		}
		if matched != len(labels) {
			continue
		}
		ok = true
		switch {
		case s.GetCounter() != nil:
			sum += s.GetCounter().GetValue()
		case s.GetGauge() != nil:
			sum += s.GetGauge().GetValue()
		case s.GetHistogram() != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return sum, ok
}

// Prometheus is a Prometheus server (Debian package prometheus) run for a test on a free
// loopback port, with its storage in the test's temporary directory, scraping its targets every
// second.
type Prometheus struct {
	url string
}

// prometheusReadyTimeout bounds the wait for a started Prometheus to be ready.
const prometheusReadyTimeout = 30 * time.Second

// StartPrometheus starts Prometheus scraping the targets under the job name; it is stopped when
// the test ends. It fails the test when there is no prometheus binary (.ci/run installs it).
func StartPrometheus(t testing.TB, job string, targets ...MetricsTarget) *Prometheus {
	t.Helper()
	return StartPrometheusWithRules(t, job, "", targets...)
}

// StartPrometheusWithRules is StartPrometheus evaluating the rule file rules (YAML; "": none)
// every second.
func StartPrometheusWithRules(t testing.TB, job, rules string, targets ...MetricsTarget) *Prometheus {
	t.Helper()
	dir := t.TempDir()
	token, err := MetricsReaderToken()
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	var scrapes []any
	for _, target := range targets {
		scrapes = append(scrapes, target.scrapeConfig(job, tokenFile))
	}
	cfg := map[string]any{"scrape_configs": scrapes}
	if rules != "" {
		rulesPath := filepath.Join(dir, "rules.yml")
		if err := os.WriteFile(rulesPath, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg["rule_files"] = []string{rulesPath}
		cfg["global"] = map[string]any{"evaluation_interval": "1s"}
	}
	return startPrometheus(t, dir, cfg, job, len(targets))
}

// StartPrometheusConfig starts Prometheus with the scrape configurations (each a
// scrape_config, as a map of its YAML fields), scraping every second, and returns once it
// scraped targets targets of the job successfully. It is stopped when the test ends.
func StartPrometheusConfig(t testing.TB, job string, targets int, scrapeConfigs ...map[string]any) *Prometheus {
	t.Helper()
	var scrapes []any
	for _, sc := range scrapeConfigs {
		scrapes = append(scrapes, sc)
	}
	return startPrometheus(t, t.TempDir(), map[string]any{"scrape_configs": scrapes}, job, targets)
}

// startPrometheus starts Prometheus with the configuration cfg, its files in dir, and waits
// until it scraped targets targets of the job.
func startPrometheus(t testing.TB, dir string, cfg map[string]any, job string, targets int) *Prometheus {
	t.Helper()
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary (apt-get install prometheus): %v", err)
	}
	config, err := json.Marshal(cfg) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			if out, err := os.ReadFile(logFile.Name()); err == nil && len(out) > 0 {
				t.Logf("prometheus log:\n%s", out)
			}
		}
	})
	p := &Prometheus{url: "http://" + addr}
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, prometheusReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("prometheus exited")
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/-/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("prometheus not ready: %v", err)
	}
	// Prometheus applies its targets a few seconds after it starts: wait until each was scraped,
	// so that the test's metrics are recorded from the start.
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, prometheusReadyTimeout, true, func(ctx context.Context) (bool, error) {
		series, err := p.QueryRange(ctx, fmt.Sprintf("up{job=%q} == 1", job), time.Now().Add(-time.Second), time.Now(), time.Second)
		return err == nil && len(series) == targets, nil
	})
	if err != nil {
		t.Fatalf("prometheus did not scrape the %d targets of %s: %v", targets, job, err)
	}
	return p
}

// URL is the server's address, for clients of its HTTP API.
func (p *Prometheus) URL() string { return p.url }

// Series is one series of a range query's result: its labels and its values.
type Series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// QueryRange runs a PromQL range query from start to end, a point every step.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {step.String()},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []Series `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %s: %w", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, body.Error)
	}
	return body.Data.Result, nil
}
