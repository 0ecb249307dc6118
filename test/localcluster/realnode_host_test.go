package localcluster

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// startIn starts a process in the cgroup /name/child (created in every hierarchy) and returns it.
func startIn(t *testing.T, name, child string) *exec.Cmd {
	t.Helper()
	if err := createCgroup(name); err != nil {
		t.Fatal(err)
	}
	if err := createCgroup(name + "/" + child); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "infinity")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = removeCgroups(name)
	})
	for _, dir := range CgroupDirs(filepath.Join(name, child)) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cmd
}

func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// The real node's cleanup kills the processes of its own cgroup and removes it, and leaves a
// process in another cgroup (the host's /kubepods) alone: on cgroup v1 (every hierarchy), and on
// v2 (run it where /sys/fs/cgroup is cgroup2, e.g. in a private mount namespace:
// unshare -m sh -c 'mount -t cgroup2 none /sys/fs/cgroup && go test -run TestCgroupCleanup ./test/localcluster/').
func TestCgroupCleanupTouchesOnlyItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	suffix := strconv.Itoa(os.Getpid())
	own, host := "nodemaint-test-own-"+suffix, "nodemaint-test-kubepods-"+suffix
	ownProc := startIn(t, own, "kubepods")
	hostProc := startIn(t, host, "pod")
	t.Logf("cgroup v2: %v; hierarchies: %v", cgroupV2(), CgroupDirs(own))

	if err := killCgroup(slog.Default(), own); err != nil {
		t.Fatal(err)
	}
	_ = ownProc.Wait()
	if err := removeCgroups(own); err != nil {
		t.Fatal(err)
	}
	for _, dir := range CgroupDirs(own) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s is left", dir)
		}
	}
	if !running(hostProc.Process.Pid) {
		t.Errorf("the process in /%s was killed", host)
	}
	for _, dir := range CgroupDirs(host + "/pod") {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(hostProc.Process.Pid) {
			t.Errorf("%s: %q, %v; want the process %d", dir, b, err, hostProc.Process.Pid)
		}
	}
}

// On cgroup v2 the kubelet's controllers the root cgroup does not give its children are enabled
// for the real node's cgroup, and disabled again afterwards.
func TestCgroupControllersRestored(t *testing.T) {
	if os.Geteuid() != 0 || !cgroupV2() {
		t.Skip("needs root and cgroup v2 at /sys/fs/cgroup (see TestCgroupCleanupTouchesOnlyItsOwn)")
	}
	subtree := filepath.Join(cgroupRootDir, "cgroup.subtree_control")
	before, err := os.ReadFile(subtree)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{dir: t.TempDir(), log: slog.Default()}
	if err := os.MkdirAll(filepath.Join(c.dir, "realnode"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.enableCgroupControllers(); err != nil {
		t.Fatal(err)
	}
	name := "nodemaint-test-controllers-" + strconv.Itoa(os.Getpid())
	if err := createCgroup(name); err != nil {
		t.Fatal(err)
	}
	available, _ := os.ReadFile(filepath.Join(cgroupRootDir, "cgroup.controllers"))
	own, _ := os.ReadFile(filepath.Join(cgroupRootDir, name, "cgroup.controllers"))
	for _, ctl := range kubeletControllers {
		if slices.Contains(strings.Fields(string(available)), ctl) && !slices.Contains(strings.Fields(string(own)), ctl) {
			t.Errorf("the controller %s is not available in /%s: %q", ctl, name, own)
		}
	}
	if err := removeCgroups(name); err != nil {
		t.Fatal(err)
	}
	if err := restoreCgroupControllers(c.log, c.dir); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(subtree); string(after) != string(before) {
		t.Errorf("the root's subtree_control is %q, was %q", after, before)
	}
	t.Logf("root controllers %q, enabled before and after %q, in the node's cgroup %q", strings.TrimSpace(string(available)), strings.TrimSpace(string(before)), strings.TrimSpace(string(own)))
}
