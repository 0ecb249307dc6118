package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// controllerReadyTimeout bounds the wait for a started controller to serve /readyz.
	controllerReadyTimeout = 30 * time.Second
	// controllerStopTimeout bounds the wait for a controller to exit.
	controllerStopTimeout = 30 * time.Second
)

// Controller is a nodemaint-controller process, run from $NODEMAINT_BIN_DIR as the
// ServiceAccount nodemaint-system/nodemaint-controller, so with exactly the permissions
// config/rbac grants it. Its metrics and health endpoints listen on free 127.0.0.1 ports; its
// output goes to a log file in the cluster's directory, named when the test fails.
type Controller struct {
	t                      testing.TB
	binary, logPath        string
	metricsAddr, probeAddr string
	// root, when set, is an image's filesystem the controller runs in (NewControllerInImage):
	// binary and kubeconfig are paths inside it.
	root, kubeconfig string
	// credential is the user the controller runs as in root; nil: this process's.
	credential *syscall.Credential
	// env is the controller's environment in root: the image's.
	env []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd exited
}

// controllerKubeconfig is written once per package, by controllerKubeconfigOnce.
var (
	controllerKubeconfig     string
	controllerKubeconfigOnce = sync.OnceValue(writeControllerKubeconfig)
)

// NewController returns a stopped Controller for the test, which kills it when it ends. It
// fails the test when $NODEMAINT_BIN_DIR/nodemaint-controller does not exist: a test that could
// not run must not read as passed.
func NewController(t testing.TB) *Controller {
	t.Helper()
	binDir := os.Getenv("NODEMAINT_BIN_DIR")
	if binDir == "" {
		t.Fatal("NODEMAINT_BIN_DIR is not set: run the end-to-end tests with make test-e2e, which builds the binaries and sets it")
	}
	binary := filepath.Join(binDir, "nodemaint-controller")
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("no nodemaint-controller binary (make build): %v", err)
	}
	return newController(t, binary)
}

// NewControllerInImage returns a stopped Controller that runs the image's own
// nodemaint-controller (entrypoint, a path in root, the image's extracted filesystem) as the
// image's user, chrooted into root: with the image's CA certificates, time zones and users, not
// this machine's. The controller's kubeconfig is copied into root. Entering root needs this
// process to run as root; otherwise the image's binary runs from root as this process's user.
func NewControllerInImage(t testing.TB, root, entrypoint string, uid, gid uint32, env []string) *Controller {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, entrypoint)); err != nil {
		t.Fatalf("no controller in the image: %v", err)
	}
	c := newController(t, filepath.Join(root, entrypoint))
	if os.Getuid() != 0 {
		t.Logf("not root: running the image's %s from %s without entering its filesystem", entrypoint, root)
		return c
	}
	kubeconfig, err := os.ReadFile(controllerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const inImage = "/tmp/nodemaint-controller.kubeconfig"
	if err := os.WriteFile(filepath.Join(root, inImage), kubeconfig, 0o644); err != nil {
		t.Fatal(err)
	}
	c.root, c.binary, c.kubeconfig = root, entrypoint, inImage
	c.credential, c.env = &syscall.Credential{Uid: uid, Gid: gid}, env
	return c
}

// NewControllerFor returns a stopped Controller, as NewController, that talks to the cluster of
// kubeconfig instead of the package's (a test's second cluster); its log is in the package's
// cluster's directory.
func NewControllerFor(t testing.TB, kubeconfig string) *Controller {
	t.Helper()
	c := NewController(t)
	c.kubeconfig = kubeconfig
	return c
}

func newController(t testing.TB, binary string) *Controller {
	t.Helper()
	if err := controllerKubeconfigOnce(); err != nil {
		t.Fatalf("writing the kubeconfig of nodemaint-controller: %v", err)
	}
	logFile, err := os.CreateTemp(filepath.Join(cluster.Dir(), "logs"),
		"nodemaint-controller-"+strings.ReplaceAll(t.Name(), "/", "_")+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	c := &Controller{
		t:           t,
		binary:      binary,
		logPath:     logFile.Name(),
		metricsAddr: freeAddr(t),
		probeAddr:   freeAddr(t),
		kubeconfig:  controllerKubeconfig,
	}
	t.Cleanup(func() {
		c.signal(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("nodemaint-controller log: %s; its last lines:\n%s", c.logPath, logTail(c.logPath, failedLogLines))
		}
	})
	return c
}

// failedLogLines is how many of the controller's last log lines a failed test prints: CI keeps
// the cluster's directory on a machine nobody may log in to, and its output is what is read.
const failedLogLines = 40

// logTail returns the last n lines of the file at path, each cut at 400 bytes.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// writeControllerKubeconfig writes a kubeconfig with a token of the controller's
// ServiceAccount (TokenRequest API) and the cluster's CA.
func writeControllerKubeconfig() error {
	ctx := context.Background()
	token, err := ServiceAccountToken(ctx, ControllerNamespace, ControllerServiceAccount)
	if err != nil {
		return err
	}
	path := filepath.Join(cluster.Dir(), "kubeconfigs", "nodemaint-controller.kubeconfig")
	if err := cluster.WriteKubeconfig(path, &clientcmdapi.AuthInfo{Token: token}); err != nil {
		return err
	}
	controllerKubeconfig = path
	return nil
}

// Start starts the controller with --kubeconfig, --metrics-bind-address,
// --health-probe-bind-address, short leader election, and then extraArgs, which may override
// them, and waits until it serves /readyz and its metrics port accepts connections.
func (c *Controller) Start(extraArgs ...string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		c.t.Fatal("nodemaint-controller is already running")
	}
	args := append([]string{
		"--kubeconfig=" + c.kubeconfig,
		"--metrics-bind-address=" + c.metricsAddr,
		"--health-probe-bind-address=" + c.probeAddr,
		// Tests kill and restart controllers: a new one takes over in seconds, not 15s.
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms",
	}, extraArgs...)
	logFile, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s nodemaint-controller %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))

	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Die with the test binary, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Chroot: c.root, Credential: c.credential}
	if c.root != "" {
		cmd.Dir, cmd.Env = "/", c.env
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting nodemaint-controller: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited

	metricsOff := slices.Contains(extraArgs, "--metrics-bind-address=0")
	err = wait.PollUntilContextTimeout(c.t.Context(), 100*time.Millisecond, controllerReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("nodemaint-controller exited: %v", cmd.ProcessState)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.HealthURL()+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		// The metrics server starts beside the probes, after its self-signed certificate is made.
		if !metricsOff {
			conn, err := net.DialTimeout("tcp", c.metricsAddr, time.Second)
			if err != nil {
				return false, nil
			}
			conn.Close()
		}
		return true, nil
	})
	if err != nil {
		c.t.Fatalf("nodemaint-controller not ready (log: %s): %v", c.logPath, err)
	}
}

// Pid is the running controller's process ID; 0 when it does not run.
func (c *Controller) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Stop stops the controller with SIGTERM, as Kubernetes does, and waits until it exited.
func (c *Controller) Stop() {
	c.t.Helper()
	if err := c.signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
}

// Kill kills the controller with SIGKILL, as a crash would, and waits until it exited.
func (c *Controller) Kill() {
	c.t.Helper()
	if err := c.signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
}

// signal sends sig to the controller, if it runs, and waits until it exited.
func (c *Controller) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-c.exited:
	case <-time.After(controllerStopTimeout):
		return fmt.Errorf("nodemaint-controller still runs %v after %v (log: %s)", controllerStopTimeout, sig, c.logPath)
	}
	c.cmd = nil
	return nil
}

// Running reports whether the controller was started and not stopped or killed since. A
// controller that exited by itself still counts as running: it was not asked to stop.
func (c *Controller) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd != nil
}

// LeaderLease is the name of the controller's leader election Lease, the name label of its
// leader election metric.
const LeaderLease = "nodemaint-controller.nodemaint.dev"

// Leads reports whether the controller's leader election metric says it leads; false when its
// metrics cannot be read.
func (c *Controller) Leads(ctx context.Context) bool {
	m, err := ScrapeMetrics(ctx, c.MetricsTarget())
	if err != nil {
		return false
	}
	v, _ := m.Value("leader_election_master_status", map[string]string{"name": LeaderLease})
	return v == 1
}

// Healthy reports whether the controller answers /healthz with 200: false once it exited.
func (c *Controller) Healthy() bool {
	resp, err := http.Get(c.HealthURL() + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// LogPath returns the path of the controller's log.
func (c *Controller) LogPath() string { return c.logPath }

// MetricsURL returns the base URL of the controller's metrics endpoint: HTTPS, for GetMetrics.
func (c *Controller) MetricsURL() string { return "https://" + c.metricsAddr }

// HealthURL returns the base URL of the controller's /healthz and /readyz endpoints.
func (c *Controller) HealthURL() string { return "http://" + c.probeAddr }

// freeAddr returns a 127.0.0.1 address with a port that is free now.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
