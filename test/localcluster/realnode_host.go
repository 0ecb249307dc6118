package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the real node changes on the machine beyond its own directories and bridge, and how it
// undoes it: its cgroups and the kernel settings the kubelet checks. Nothing else of the host's
// is touched: the processes killed are those in the node's own cgroups (and those it started,
// by pid), the cgroups removed are its own, and every kernel setting changed is written back by
// `make cluster-down`.

// realNodeCgroupRoot is the real node's cgroup, the kubelet's cgroupRoot: its pods run under
// /nodemaint-realnode/kubepods, never in a /kubepods of the host's (a kubelet or k3s of the
// machine's own with the cgroupfs driver keeps its pods there).
const realNodeCgroupRoot = "nodemaint-realnode"

const (
	cgroupRootDir      = "/sys/fs/cgroup"
	cgroup2SuperMagic  = 0x63677270
	cgroupV1SuperMagic = 0x27e0eb
)

// cgroupV2 reports whether the machine mounts cgroup v2 alone (the unified hierarchy at
// /sys/fs/cgroup), as the kubelet and runc decide it; otherwise it mounts cgroup v1 (or v1 and
// v2 side by side, "hybrid", where the kubelet uses v1).
func cgroupV2() bool {
	var st syscall.Statfs_t
	return syscall.Statfs(cgroupRootDir, &st) == nil && st.Type == cgroup2SuperMagic
}

// CgroupDirs returns the directories of the cgroup /name in every cgroup hierarchy of the
// machine: on cgroup v2 the one of the unified hierarchy; on v1 one per hierarchy mounted under
// /sys/fs/cgroup, the unified one of a hybrid machine included (runc uses it there too).
func CgroupDirs(name string) []string {
	if cgroupV2() {
		return []string{filepath.Join(cgroupRootDir, name)}
	}
	var dirs []string
	entries, _ := os.ReadDir(cgroupRootDir)
	for _, e := range entries {
		// cpu,cpuacct and its like are links to a hierarchy listed under its own name.
		if !e.IsDir() {
			continue
		}
		mount := filepath.Join(cgroupRootDir, e.Name())
		var st syscall.Statfs_t
		if syscall.Statfs(mount, &st) == nil && (st.Type == cgroupV1SuperMagic || st.Type == cgroup2SuperMagic) {
			dirs = append(dirs, filepath.Join(mount, name))
		}
	}
	return dirs
}

// createCgroup creates the cgroup /name in every hierarchy (the kubelet requires its cgroupRoot
// to exist). A v1 cpuset cgroup starts with no CPUs and memory nodes: it gets its parent's.
func createCgroup(name string) error {
	v2 := cgroupV2()
	for _, dir := range CgroupDirs(name) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating the cgroup /%s: %w", name, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			own, err := os.ReadFile(filepath.Join(dir, f))
			if v2 || err != nil || strings.TrimSpace(string(own)) != "" {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// kubeletControllers are the cgroup v2 controllers the kubelet requires of its cgroupRoot, those
// of them the machine has (pkg/kubelet/cm, getSupportedUnifiedControllers).
var kubeletControllers = []string{"cpu", "cpuset", "memory", "hugetlb", "pids"}

// controllersFile is where the cluster in dir records the cgroup v2 controllers it enabled.
func controllersFile(dir string) string { return filepath.Join(dir, "realnode", "cgroup-controllers") }

// enableCgroupControllers enables, on cgroup v2, the kubelet's controllers in the root cgroup's
// subtree_control, so that the real node's cgroup has them (a kubelet whose cgroupRoot is / does
// the same when it creates /kubepods). Those it enables are recorded first, and
// restoreCgroupControllers disables them again.
func (c *Cluster) enableCgroupControllers() error {
	if !cgroupV2() {
		return nil
	}
	available, err := os.ReadFile(filepath.Join(cgroupRootDir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	enabled, err := os.ReadFile(filepath.Join(cgroupRootDir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	recorded, _ := os.ReadFile(controllersFile(c.dir))
	for _, ctl := range kubeletControllers {
		if !slices.Contains(strings.Fields(string(available)), ctl) || slices.Contains(strings.Fields(string(enabled)), ctl) {
			continue
		}
		recorded = append(recorded, ctl+"\n"...)
		if err := os.WriteFile(controllersFile(c.dir), recorded, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cgroupRootDir, "cgroup.subtree_control"), []byte("+"+ctl), 0o644); err != nil {
			return fmt.Errorf("enabling the cgroup controller %s: %w", ctl, err)
		}
		c.log.Info("Enabled a cgroup controller for the real node", "controller", ctl)
	}
	return nil
}

// restoreCgroupControllers disables the cgroup v2 controllers the cluster in dir enabled, each
// unless something else uses it meanwhile (then it is left enabled, and logged).
func restoreCgroupControllers(log *slog.Logger, dir string) error {
	recorded, err := os.ReadFile(controllersFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, ctl := range strings.Fields(string(recorded)) {
		if err := os.WriteFile(filepath.Join(cgroupRootDir, "cgroup.subtree_control"), []byte("-"+ctl), 0o644); err != nil {
			log.Info("A cgroup controller the real node enabled is in use: left enabled", "controller", ctl, "error", err)
			continue
		}
		log.Info("Disabled a cgroup controller the real node enabled", "controller", ctl)
	}
	return os.Remove(controllersFile(dir))
}

// killCgroup SIGKILLs every process in the cgroup /name and below (for the real node's, its
// containers), and nothing else: on cgroup v2 with cgroup.kill, else process by process until
// none is left.
func killCgroup(log *slog.Logger, name string) error {
	dirs := CgroupDirs(name)
	if cgroupV2() {
		// The whole subtree at once, with no race against forks (Linux 5.14).
		if err := os.WriteFile(filepath.Join(dirs[0], "cgroup.kill"), []byte("1"), 0o644); err != nil &&
			!errors.Is(err, os.ErrNotExist) {
			log.Info("cgroup.kill failed; killing process by process", "cgroup", dirs[0], "error", err)
		}
	}
	for range 50 {
		var pids []int
		for _, dir := range dirs {
			pids = append(pids, cgroupProcs(dir)...)
		}
		slices.Sort(pids)
		pids = slices.Compact(pids)
		if len(pids) == 0 {
			return nil
		}
		log.Info("Killing the processes of a cgroup", "processes", len(pids), "cgroup", "/"+name)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes left in the cgroup /%s", name)
}

// cgroupProcs lists the processes in the cgroup directory dir and below.
func cgroupProcs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cgroup /name and its children, deepest first, in every hierarchy.
func removeCgroups(name string) error {
	var errs []error
	for _, dir := range CgroupDirs(name) {
		errs = append(errs, removeCgroup(dir))
	}
	return errors.Join(errs...)
}

// removeCgroup removes the cgroup directory dir and its children, deepest first.
func removeCgroup(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.Reverse(dirs)
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Sysctl is a kernel setting, named as sysctl(8) names it (kernel.panic), and a value.
type Sysctl struct {
	Name, Value string
}

// KubeletSysctls are the kernel settings the kubelet wants (pkg/kubelet/cm,
// setupKernelTunables). With protectKernelDefaults it refuses to start unless they hold, rather
// than setting them itself: the harness sets them before the kubelet starts and cluster-down
// writes the machine's own back.
var KubeletSysctls = []Sysctl{
	{"vm.overcommit_memory", "1"},
	{"vm.panic_on_oom", "0"},
	{"kernel.panic", "10"},
	{"kernel.panic_on_oops", "1"},
	{"kernel.keys.root_maxkeys", "1000000"},
	{"kernel.keys.root_maxbytes", "25000000"},
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// ReadSysctl returns a kernel setting's value.
func ReadSysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	return strings.TrimSpace(string(b)), err
}

// sysctlRecord is a kernel setting the harness changed: its value before, and the value set.
type sysctlRecord struct {
	Name     string `json:"name"`
	Original string `json:"original"`
	Set      string `json:"set"`
}

// sysctlsFile is where the cluster in dir records the kernel settings it changed.
func sysctlsFile(dir string) string { return filepath.Join(dir, "realnode", "sysctls.json") }

// setHostSysctls sets the kernel settings, first recording in the cluster's sysctlsFile the
// original value of each it changes (once: a setting recorded already keeps its original), so
// that restoreHostSysctls writes them back. The record is written before the setting.
func (c *Cluster) setHostSysctls(settings []Sysctl) error {
	file := sysctlsFile(c.dir)
	records, err := readSysctlRecords(file)
	if err != nil {
		return err
	}
	for _, s := range settings {
		cur, err := ReadSysctl(s.Name)
		if err != nil {
			return err
		}
		if cur == s.Value {
			continue
		}
		if i := slices.IndexFunc(records, func(r sysctlRecord) bool { return r.Name == s.Name }); i >= 0 {
			records[i].Set = s.Value
		} else {
			records = append(records, sysctlRecord{Name: s.Name, Original: cur, Set: s.Value})
		}
		b, err := json.MarshalIndent(records, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(sysctlPath(s.Name), []byte(s.Value), 0o644); err != nil {
			return fmt.Errorf("setting %s=%s: %w", s.Name, s.Value, err)
		}
		c.log.Info("Set a kernel setting for the real node", "sysctl", s.Name, "value", s.Value, "was", cur)
	}
	return nil
}

// restoreHostSysctls writes back the original values the cluster in dir recorded, each unless
// something else changed it since (then it is left as found, and logged), and removes the
// record.
func restoreHostSysctls(log *slog.Logger, dir string) error {
	file := sysctlsFile(dir)
	records, err := readSysctlRecords(file)
	if err != nil || len(records) == 0 {
		return err
	}
	var errs []error
	for _, r := range records {
		cur, err := ReadSysctl(r.Name)
		switch {
		case err != nil:
			errs = append(errs, err)
		case cur != r.Set:
			log.Info("A kernel setting changed since the real node set it: left as it is", "sysctl", r.Name, "value", cur, "set", r.Set, "original", r.Original)
		default:
			if err := os.WriteFile(sysctlPath(r.Name), []byte(r.Original), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s=%s: %w", r.Name, r.Original, err))
				continue
			}
			log.Info("Restored a kernel setting", "sysctl", r.Name, "value", r.Original)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(file)
}

func readSysctlRecords(file string) ([]sysctlRecord, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var records []sysctlRecord
	if err := json.Unmarshal(b, &records); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return records, nil
}

// hostDirs are directories outside the real node's own that its kubelet and containerd create
// when missing: the kubelet's links to the containers' logs and libcni's cache.
var hostDirs = []string{containerLogLinks, cniCacheDir}

// cniCacheDir is libcni's cache (containerd's CNI results), not configurable in containerd.
const cniCacheDir = "/var/lib/cni"

// createdDirsFile is where the cluster in dir records the hostDirs that did not exist before
// its real node started.
func createdDirsFile(dir string) string { return filepath.Join(dir, "realnode", "created-dirs") }

// recordHostDirs records the hostDirs that do not exist yet, before the real node starts.
func (c *Cluster) recordHostDirs() error {
	recorded, _ := os.ReadFile(createdDirsFile(c.dir))
	for _, d := range hostDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) && !slices.Contains(strings.Fields(string(recorded)), d) {
			recorded = append(recorded, d+"\n"...)
		}
	}
	return os.WriteFile(createdDirsFile(c.dir), recorded, 0o644)
}

// removeHostDirs removes the hostDirs the cluster in dir created, each with what is below it
// only as far as that is empty directories: a file in one (something else's) keeps it.
func removeHostDirs(dir string) error {
	recorded, err := os.ReadFile(createdDirsFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, d := range strings.Fields(string(recorded)) {
		var dirs []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, sub := range dirs {
			_ = syscall.Rmdir(sub)
		}
	}
	return os.Remove(createdDirsFile(dir))
}

// removeCNICache removes libcni's cached results of the real node's network (left by containers
// killed without a CNI DEL).
func removeCNICache() error {
	matches, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", realNodeNetwork+"-*"))
	var errs []error
	for _, m := range matches {
		errs = append(errs, os.Remove(m))
	}
	return errors.Join(errs...)
}
