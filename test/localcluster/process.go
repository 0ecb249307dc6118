package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The components of a cluster. Each runs as a process in its own session, so that it outlives
// the program that started it; its pid is in <dir>/run/<name>.pid and its output goes to
// <dir>/logs/<name>.log.
const (
	etcd                  = "etcd"
	kubeAPIServer         = "kube-apiserver"
	kubeControllerManager = "kube-controller-manager"
	kubeScheduler         = "kube-scheduler"
	kwok                  = "kwok"
)

// Components are the names of the components of a cluster, in start order.
var Components = []string{etcd, kubeAPIServer, kubeControllerManager, kubeScheduler, kwok}

// stopGracePeriod is how long a component gets to exit after SIGTERM before it is SIGKILLed.
const stopGracePeriod = 5 * time.Second

// errAddressInUse reports that a component could not listen on its port.
var errAddressInUse = errors.New("address already in use")

func pidFile(dir, name string) string { return filepath.Join(dir, "run", name+".pid") }

func logPath(dir, name string) string { return filepath.Join(dir, "logs", name+".log") }

// startProcess starts the component name, detached from the calling process, and returns a
// channel closed when it exits.
func (c *Cluster) startProcess(name string) (<-chan struct{}, error) {
	return c.startCommand(name, exec.Command(filepath.Join(c.binDir, name), c.args(name)...))
}

// startCommand starts cmd as the component name, detached from the calling process, with env
// added to the environment, and returns a channel closed when it exits.
func (c *Cluster) startCommand(name string, cmd *exec.Cmd, env ...string) (<-chan struct{}, error) {
	for _, d := range []string{filepath.Dir(pidFile(c.dir, name)), filepath.Dir(logPath(c.dir, name))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	logFile, err := os.OpenFile(logPath(c.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if c.killWithParent {
		// Sent when the starting thread ends, which Go threads only do after
		// runtime.LockOSThread.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	if err := os.WriteFile(pidFile(c.dir, name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil, err
	}
	c.log.Info("Started", "component", name, "pid", cmd.Process.Pid, "log", logPath(c.dir, name))
	return exited, nil
}

// runningPid returns the pid recorded for the component name of the cluster in dir, if that
// process is still running.
func runningPid(dir, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return pid, isComponent(pid, dir, name)
}

// isComponent reports whether pid is a live process of the component name of the cluster in
// dir: its binary is called name and its arguments point into dir. This keeps a pid that was
// recorded long ago and reused since by an unrelated process from being signalled. A zombie
// has an empty command line and counts as gone.
func isComponent(pid int, dir, name string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return filepath.Base(string(argv0)) == name && bytes.Contains(cmdline, []byte(dir))
}

// stopAll stops every component of the cluster in dir: the real node first (and what it left
// on the machine), the clients of kube-apiserver, then kube-apiserver, then etcd, which would
// otherwise wait for kube-apiserver's watches.
func stopAll(log *slog.Logger, dir string) error {
	return errors.Join(
		stopRealNode(log, dir),
		stopProcesses(log, dir, kwok, kubeScheduler, kubeControllerManager),
		stopProcesses(log, dir, kubeAPIServer),
		stopProcesses(log, dir, etcd),
	)
}

// stopProcesses stops the named components of the cluster in dir: SIGTERM to their process
// groups, then SIGKILL to what is left after stopGracePeriod. Components that do not run are
// skipped; the pid files are removed.
func stopProcesses(log *slog.Logger, dir string, names ...string) error {
	pids := map[string]int{}
	for _, name := range names {
		if pid, ok := runningPid(dir, name); ok {
			pids[name] = pid
			_ = syscall.Kill(-pid, syscall.SIGTERM)
		}
	}
	exited := func() {
		for name, pid := range pids {
			if !isComponent(pid, dir, name) {
				log.Info("Stopped", "component", name, "pid", pid)
				delete(pids, name)
			}
		}
	}
	// Each wait ends when every process exited, or after stopGracePeriod.
	waitExited := func() {
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, stopGracePeriod, true, func(context.Context) (bool, error) {
			exited()
			return len(pids) == 0, nil
		})
	}
	waitExited()
	for name, pid := range pids {
		log.Info("Killing", "component", name, "pid", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	waitExited()
	if len(pids) > 0 {
		return fmt.Errorf("still running after SIGKILL: %v", pids)
	}
	for _, name := range names {
		if err := os.Remove(pidFile(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// exitError describes a component that exited while it was expected to run, with the end of
// its log. It wraps errAddressInUse when the component could not listen on its port.
func exitError(dir, name string) error {
	b, _ := os.ReadFile(logPath(dir, name))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	tail := strings.Join(lines[max(0, len(lines)-15):], "\n")
	err := fmt.Errorf("%s exited; end of %s:\n%s", name, logPath(dir, name), tail)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w: %w", errAddressInUse, err)
	}
	return err
}
