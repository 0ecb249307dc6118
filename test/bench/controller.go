package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/test/localcluster"
)

// Where nodemaint-controller runs and whose permissions it has (config/rbac).
const (
	controllerNamespace      = "nodemaint-system"
	controllerServiceAccount = "nodemaint-controller"
)

// writeControllerKubeconfig writes a kubeconfig with a token of the controller's
// ServiceAccount, so that it runs with exactly the permissions config/rbac grants it.
func writeControllerKubeconfig(ctx context.Context, c *localcluster.Cluster) (string, error) {
	token, err := c.Client().CoreV1().ServiceAccounts(controllerNamespace).CreateToken(ctx, controllerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir(), "kubeconfigs", "nodemaint-controller.kubeconfig")
	return path, c.WriteKubeconfig(path, &clientcmdapi.AuthInfo{Token: token.Status.Token})
}

// controllerProcess is a running nodemaint-controller.
type controllerProcess struct {
	cmd         *exec.Cmd
	exited      chan struct{}
	metricsAddr string
	pprofAddr   string
}

// startController starts the controller, logging to the cluster's logs directory, and waits
// until it is ready.
func (b *bench) startController(ctx context.Context, name, method string) (*controllerProcess, error) {
	metricsAddr, probeAddr, pprofAddr, err := freeAddr(), freeAddr(), freeAddr(), error(nil)
	if metricsAddr == "" || probeAddr == "" || pprofAddr == "" {
		return nil, errors.New("no free port")
	}
	logPath := filepath.Join(b.cluster.Dir(), "logs", "nodemaint-controller-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := append([]string{
		"--kubeconfig=" + b.kubeconfig,
		"--metrics-bind-address=" + metricsAddr,
		// The bench scrapes its own controller on 127.0.0.1: plain HTTP, no token reviews.
		"--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr,
		"--pprof-bind-address=" + pprofAddr,
		"--leader-elect=false",
	}, protocolArgs(method, b.cluster.EvictionRequestAPI())...)
	args = append(args, b.o.controllerArgs...)
	cmd := exec.Command(b.o.controller, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nodemaint-controller: %w", err)
	}
	p := &controllerProcess{cmd: cmd, exited: make(chan struct{}), metricsAddr: metricsAddr, pprofAddr: pprofAddr}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("nodemaint-controller exited: %v (log: %s)", cmd.ProcessState, logPath)
		default:
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("nodemaint-controller not ready (log: %s): %w", logPath, err)
	}
	return p, nil
}

func (p *controllerProcess) pid() int { return p.cmd.Process.Pid }

// kill kills the controller and waits until it exited.
func (p *controllerProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// heapProfile saves the controller's heap profile (after a garbage collection) to path and
// returns its Go heap in use, in bytes, from its metrics.
func (p *controllerProcess) heapProfile(ctx context.Context, path string) (float64, error) {
	if err := httpGetTo(ctx, "http://"+p.pprofAddr+"/debug/pprof/heap?gc=1", path); err != nil {
		return 0, err
	}
	text, err := httpGet(ctx, "http://"+p.metricsAddr+"/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(text), "\n") {
		if value, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			return strconv.ParseFloat(strings.TrimSpace(value), 64)
		}
	}
	return 0, errors.New("no go_memstats_heap_inuse_bytes in the controller's metrics")
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func httpGetTo(ctx context.Context, url, path string) error {
	data, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// controllerMetrics is what the benchmark reads of the controller's metrics.
type controllerMetrics struct {
	// requests are its client-go requests by HTTP method.
	requests map[string]float64
	// writes are its writes (nodemaint_api_requests_total) by "client verb resource [subresource]".
	writes map[string]float64
	// all are its requests (nodemaint_api_requests_total), every client's, by
	// "verb resource[/subresource]".
	all map[string]float64
	// queueWait and reconcile are the node controller's work queue wait and reconcile time:
	// sums in seconds and counts ("sum", "count"); responderWait and responderReconcile the
	// Deployment responder's.
	queueWait, reconcile, responderWait, responderReconcile map[string]float64
	// answers is the cumulative histogram of the owners' acceptances
	// (nodemaint_evacuation_answer_duration_seconds{answer="accepted"}) by upper bound ("+Inf"
	// the count); evictions are nodemaint's evictions by result.
	answers, evictions map[string]float64
	// watchEvents are the events its informers received (nodemaint_watch_events_total) by kind.
	watchEvents map[string]float64
	// text is the whole exposition, as read.
	text []byte
}

// metrics reads the controller's metrics.
func (p *controllerProcess) metrics(ctx context.Context) (controllerMetrics, error) {
	var m controllerMetrics
	text, err := httpGet(ctx, "http://"+p.metricsAddr+"/metrics")
	if err != nil {
		return m, err
	}
	m.text = text
	if m.requests, err = sumCounter(bytes.NewReader(text), "rest_client_requests_total", "method"); err != nil {
		return m, err
	}
	all, err := sumCounter(bytes.NewReader(text), "nodemaint_api_requests_total", "client", "verb", "resource", "subresource")
	if err != nil {
		return m, err
	}
	byVerb, err := sumCounter(bytes.NewReader(text), "nodemaint_api_requests_total", "verb", "resource", "subresource")
	if err != nil {
		return m, err
	}
	m.all = map[string]float64{}
	for k, v := range byVerb {
		f := strings.Fields(k)
		if len(f) == 3 {
			k = f[0] + " " + f[1] + "/" + f[2]
		}
		m.all[k] += v
	}
	m.writes = map[string]float64{}
	for k, v := range all {
		if f := strings.Fields(k); len(f) >= 2 && isWrite(f[1]) {
			m.writes[k] = v
		}
	}
	m.queueWait, m.reconcile = map[string]float64{}, map[string]float64{}
	m.responderWait, m.responderReconcile = map[string]float64{}, map[string]float64{}
	for _, part := range []string{"sum", "count"} {
		wait, err := sumCounter(bytes.NewReader(text), "workqueue_queue_duration_seconds_"+part, "name")
		if err != nil {
			return m, err
		}
		rec, err := sumCounter(bytes.NewReader(text), "controller_runtime_reconcile_time_seconds_"+part, "controller")
		if err != nil {
			return m, err
		}
		m.queueWait[part], m.reconcile[part] = wait["node"], rec["node"]
		m.responderWait[part], m.responderReconcile[part] = wait[responderController], rec[responderController]
	}
	answers, err := sumCounter(bytes.NewReader(text), "nodemaint_evacuation_answer_duration_seconds_bucket", "answer", "le")
	if err != nil {
		return m, err
	}
	m.answers = map[string]float64{}
	for k, v := range answers {
		if le, ok := strings.CutPrefix(k, "accepted "); ok {
			m.answers[le] = v
		}
	}
	if m.evictions, err = sumCounter(bytes.NewReader(text), "nodemaint_evictions_total", "result"); err != nil {
		return m, err
	}
	if m.watchEvents, err = sumCounter(bytes.NewReader(text), "nodemaint_watch_events_total", "kind"); err != nil {
		return m, err
	}
	return m, nil
}

// responderController is the Deployment responder's controller name (its work queue's).
const responderController = "deployment-evacuation"

// AnswerLatency is how long owners took to accept nodemaint's evacuation requests during a run,
// from the controller's histogram (whole seconds; a quantile is the upper bound of its bucket).
type AnswerLatency struct {
	Accepted int `json:"accepted"`
	// MedianSeconds, P99Seconds and MaxSeconds are bucket upper bounds: "at most".
	MedianSeconds float64 `json:"medianSeconds"`
	P99Seconds    float64 `json:"p99Seconds"`
	MaxSeconds    float64 `json:"maxSeconds"`
}

// answerLatency reads the acceptances between two reads of the cumulative histogram; nil without
// any.
func answerLatency(after, before map[string]float64) *AnswerLatency {
	type bucket struct{ le, n float64 }
	var buckets []bucket
	for k, v := range after {
		le, err := strconv.ParseFloat(k, 64)
		if err != nil {
			continue // +Inf
		}
		buckets = append(buckets, bucket{le, v - before[k]})
	}
	total := after["+Inf"] - before["+Inf"]
	if total <= 0 {
		return nil
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	at := func(q float64) float64 {
		for _, b := range buckets {
			if b.n >= q*total {
				return b.le
			}
		}
		return math.Inf(1)
	}
	return &AnswerLatency{Accepted: int(total), MedianSeconds: at(0.5), P99Seconds: at(0.99), MaxSeconds: at(1)}
}

// isWrite says whether the API verb changes something.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// meanOf is the mean of a histogram between two reads (sum over count), nil without samples.
func meanOf(after, before map[string]float64) *float64 {
	n := after["count"] - before["count"]
	if n <= 0 {
		return nil
	}
	return ptr.To(float64(int64((after["sum"]-before["sum"])/n*10000+0.5)) / 10000)
}

// sumCounter sums the samples of the Prometheus counter metric in the text exposition r by
// the values of labels, joined by spaces (empty values left out).
func sumCounter(r io.Reader, metric string, labels ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := metric + "{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("metric line %q", line)
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		values := map[string]string{}
		for _, kv := range strings.Split(line[len(prefix):end], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				values[k] = strings.Trim(v, `"`)
			}
		}
		var key []string
		for _, l := range labels {
			if v := values[l]; v != "" {
				key = append(key, v)
			}
		}
		out[strings.Join(key, " ")] += value
	}
	return out, sc.Err()
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

// procStats returns the CPU seconds (user and system) the process used and its peak resident
// memory (VmHWM) in KiB.
func procStats(pid int) (cpuSeconds float64, hwmKiB int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	if cpuSeconds, err = parseStatCPU(string(stat)); err != nil {
		return 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	hwmKiB, err = statusKiB(string(status), "VmHWM")
	return cpuSeconds, hwmKiB, err
}

// procRSS returns the process's resident memory (VmRSS) in KiB.
func procRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return statusKiB(string(status), "VmRSS")
}

// parseStatCPU returns utime+stime of a /proc/<pid>/stat line, in seconds.
func parseStatCPU(stat string) (float64, error) {
	// The command (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/<pid>/stat: %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/<pid>/stat: %q", stat)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}

// statusKiB returns the value in kB of the field of a /proc/<pid>/status.
func statusKiB(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && k == field {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/<pid>/status", field)
}

// freeAddr returns a 127.0.0.1 address with a port that is free now, or "".
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// protocolArgs are the controller's flags for the method: nodemaint-er asks through
// EvictionRequests; nodemaint through the pods' conditions, also on a cluster that serves the
// EvictionRequest API (where --evacuation-protocol=auto would choose EvictionRequests).
func protocolArgs(method string, evictionRequestAPI bool) []string {
	switch {
	case method == MethodNodemaintER:
		return []string{"--evacuation-protocol=eviction-request"}
	case evictionRequestAPI:
		return []string{"--evacuation-protocol=pod-conditions"}
	}
	return nil
}
