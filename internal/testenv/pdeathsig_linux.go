//go:build linux

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startTiedToProcess starts env so that the kernel kills etcd and kube-apiserver when this process
// ends, however it ends: a panic, os.Exit, go test -timeout's SIGQUIT, a SIGKILL. Each runs with
// PR_SET_PDEATHSIG=SIGKILL. envtest runs the binaries itself and takes no SysProcAttr, so they are
// started through a script in which setpriv(1) sets the signal and execs the binary; the PID envtest
// waits for and stops is still the binary's. The script exits instead if this process is no longer
// its parent: one that died between the fork and setpriv would never send the signal.
//
// The kernel sends the signal when the thread that forked the child exits, not the process, and Go
// ends threads now and then; so envtest forks from a goroutine locked to a thread that never exits.
func startTiedToProcess(env *envtest.Environment) (*rest.Config, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, fmt.Errorf("setpriv (util-linux) has the kernel kill etcd and kube-apiserver with the test process: %w", err)
	}
	dir, err := os.MkdirTemp("", "nodemaint-testenv-")
	if err != nil {
		return nil, err
	}
	// The scripts are read only when the binaries start.
	defer os.RemoveAll(dir)
	apiServer := env.ControlPlane.GetAPIServer()
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	for _, bin := range []struct {
		name, envVar string
		path         *string
	}{
		{"etcd", "TEST_ASSET_ETCD", &env.ControlPlane.Etcd.Path},
		{"kube-apiserver", "TEST_ASSET_KUBE_APISERVER", &apiServer.Path},
	} {
		// Where envtest looks for the binary.
		target, ok := os.LookupEnv(bin.envVar)
		if !ok {
			target = filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), bin.name)
		}
		if _, err := os.Stat(target); err != nil {
			return nil, err
		}
		script := filepath.Join(dir, bin.name)
		content := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- /bin/sh -c '[ \"$PPID\" = %d ] && exec \"$0\" \"$@\"' %s \"$@\"\n",
			shellQuote(setpriv), os.Getpid(), shellQuote(target))
		if err := os.WriteFile(script, []byte(content), 0o755); err != nil {
			return nil, err
		}
		*bin.path = script
	}
	var cfg *rest.Config
	onForkThread(func() { cfg, err = env.Start() })
	return cfg, err
}

var forkThread = sync.OnceValue(func() chan<- func() {
	funcs := make(chan func())
	go func() {
		runtime.LockOSThread() // and never unlocked: the goroutine never returns.
		for f := range funcs {
			f()
		}
	}()
	return funcs
})

// StartTied starts cmd so that the kernel kills it with SIGKILL when this process ends, however it
// ends, as the env's etcd and kube-apiserver: for a further component a test runs against the env.
// Go's fork sets the signal and kills the child itself if this process is already gone.
func StartTied(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	onForkThread(func() { err = cmd.Start() })
	return err
}

// onForkThread runs f on the thread that never exits.
func onForkThread(f func()) {
	done := make(chan struct{})
	forkThread() <- func() { defer close(done); f() }
	<-done
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
