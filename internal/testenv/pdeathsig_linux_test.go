//go:build linux

package testenv_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

const panickingChildEnv = "NODEMAINT_TESTENV_PANICKING_CHILD"

// TestControlPlaneDiesWithPanickingTest runs itself again as a test that starts an env, prints the PIDs
// of its etcd and kube-apiserver and panics without stopping it; the two must die with it.
func TestControlPlaneDiesWithPanickingTest(t *testing.T) {
	if os.Getenv(panickingChildEnv) == "1" {
		if _, err := testenv.Start(); err != nil {
			t.Fatal(err)
		}
		for _, p := range children(os.Getpid()) {
			fmt.Printf("child %d %s\n", p.pid, p.comm)
		}
		panic("a test panics with its env running")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestControlPlaneDiesWithPanickingTest$", "-test.count=1")
	// The child's env is never stopped, so its certificates and etcd data stay: under a TMPDIR
	// of this test's, removed with it, not in the host's /tmp.
	cmd.Env = append(os.Environ(), panickingChildEnv+"=1", "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var started []proc
	for _, m := range regexp.MustCompile(`(?m)^child (\d+) (\S+)$`).FindAllStringSubmatch(out.String(), -1) {
		pid, _ := strconv.Atoi(m[1])
		started = append(started, proc{pid, m[2]})
	}
	// Whatever the outcome, nothing of this test's outlives it.
	t.Cleanup(func() {
		for _, p := range started {
			if p.alive() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	if err == nil || !strings.Contains(out.String(), "a test panics with its env running") {
		t.Fatalf("the child did not start its env and panic (%v):\n%s", err, out.String())
	}
	var names []string
	for _, p := range started {
		names = append(names, p.comm)
	}
	if strings.Join(names, ",") != "etcd,kube-apiserver" && strings.Join(names, ",") != "kube-apiserver,etcd" {
		t.Fatalf("the child's children are %v, not etcd and kube-apiserver:\n%s", names, out.String())
	}

	testutil.Eventually(t, 10*time.Second, "etcd and kube-apiserver gone after the test that started them panicked", func(context.Context) (bool, string, error) {
		var alive []proc
		for _, p := range started {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		return len(alive) == 0, fmt.Sprintf("%v still run", alive), nil
	})
}

type proc struct {
	pid  int
	comm string
}

// alive tells whether p runs: not gone, not a zombie, and its PID not taken by another program.
func (p proc) alive() bool {
	comm, state, _, ok := stat(p.pid)
	return ok && comm == p.comm && state != "Z"
}

// children lists the processes whose parent is pid.
func children(pid int) []proc {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []proc
	for _, dir := range dirs {
		child, _ := strconv.Atoi(filepath.Base(dir))
		if comm, _, ppid, ok := stat(child); ok && ppid == pid {
			found = append(found, proc{child, comm})
		}
	}
	return found
}

// stat reads the command name, state and parent PID in /proc/<pid>/stat.
func stat(pid int) (comm, state string, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", 0, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", "", 0, false
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 2 {
		return "", "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return s[open+1 : closing], fields[0], ppid, err == nil
}
