package realnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodemaint/nodemaint/test/localcluster"
)

// hostCgroup is where a kubelet or k3s of the machine's own keeps its pods with the cgroupfs
// driver; the witness process lives below it, in hostWitnessCgroup.
const (
	hostCgroup        = "kubepods"
	hostWitnessCgroup = "nodemaint-host-witness"
	realNodeBridge    = "nmreal0"
	realNodeCgroup    = "nodemaint-realnode"
)

// hostSysctls are the kernel settings the real node must leave as it found them: the
// kubelet's (which it sets itself unless protectKernelDefaults), IP forwarding (which the CNI
// bridge plugin turns on for a gateway bridge) and conntrack's (which kube-proxy sets).
func hostSysctls() []string {
	names := []string{"net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding",
		// kube-proxy's, which it sets unless told to leave them.
		"net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established", "net.netfilter.nf_conntrack_tcp_timeout_close_wait"}
	for _, s := range localcluster.KubeletSysctls {
		names = append(names, s.Name)
	}
	return names
}

// hostWitness is the machine as it was before the real node started: a process of the host's
// in a /kubepods cgroup, and the kernel settings. After the cluster stopped, the process must
// still run there, no cgroup of the real node's be left in /kubepods or anywhere, and the
// settings and interfaces be as they were.
type hostWitness struct {
	proc    *exec.Cmd
	created []string // cgroup directories the witness made, deepest first
	sysctls map[string]string
	// before are the cgroups in /kubepods before.
	before map[string]bool
	// existed: whether each of hostDirs existed before.
	existed map[string]bool
}

// hostDirs are directories the real node's kubelet and containerd create when missing.
var hostDirs = []string{"/var/log/containers", "/var/lib/cni"}

// witnessHost places a process in /kubepods/nodemaint-host-witness (creating /kubepods if the
// machine has none) in every cgroup hierarchy, and reads the kernel settings.
func witnessHost() (*hostWitness, error) {
	w := &hostWitness{sysctls: map[string]string{}, before: kubepodsChildren(), existed: map[string]bool{}}
	for _, d := range hostDirs {
		_, err := os.Stat(d)
		w.existed[d] = err == nil
	}
	for _, name := range hostSysctls() {
		v, err := localcluster.ReadSysctl(name)
		if err != nil {
			return nil, err
		}
		w.sysctls[name] = v
	}
	if _, err := net.InterfaceByName(realNodeBridge); err == nil {
		return nil, fmt.Errorf("the real node's bridge %s exists before the real node started", realNodeBridge)
	}
	for _, dir := range localcluster.CgroupDirs(hostCgroup) {
		for _, d := range []string{dir, filepath.Join(dir, hostWitnessCgroup)} {
			if err := os.Mkdir(d, 0o755); errors.Is(err, os.ErrExist) {
				continue
			} else if err != nil {
				return nil, errors.Join(err, w.remove())
			}
			w.created = slices.Insert(w.created, 0, d)
			// A v1 cpuset cgroup takes no process before it has CPUs and memory nodes.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if own, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(own)) == "" {
					parent, _ := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					_ = os.WriteFile(filepath.Join(d, f), parent, 0o644)
				}
			}
		}
	}
	w.proc = exec.Command("sleep", "infinity")
	// Gone with the test process, even one interrupted before it removes the witness: it would
	// keep the descriptors it inherited, such as flock's lock on the machine's real node.
	w.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.proc.Start(); err != nil {
		return nil, errors.Join(err, w.remove())
	}
	for _, dir := range localcluster.CgroupDirs(hostCgroup) {
		procs := filepath.Join(dir, hostWitnessCgroup, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(w.proc.Process.Pid)), 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("placing the witness in %s: %w", procs, err), w.remove())
		}
	}
	return w, nil
}

// check reports every difference between the machine now and as witnessed, then removes the
// witness.
func (w *hostWitness) check() error {
	var errs []error
	pid := w.proc.Process.Pid
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(stat), ") Z ") {
		errs = append(errs, fmt.Errorf("the host's process %d in /%s/%s was killed", pid, hostCgroup, hostWitnessCgroup))
	}
	for d := range kubepodsChildren() {
		if !w.before[d] && filepath.Base(d) != hostWitnessCgroup {
			errs = append(errs, fmt.Errorf("a new cgroup in the host's /%s: %s", hostCgroup, d))
		}
	}
	for _, dir := range localcluster.CgroupDirs(realNodeCgroup) {
		if _, err := os.Stat(dir); err == nil {
			errs = append(errs, fmt.Errorf("the real node's cgroup is left: %s", dir))
		}
	}
	for _, name := range hostSysctls() {
		if v, err := localcluster.ReadSysctl(name); err != nil || v != w.sysctls[name] {
			errs = append(errs, fmt.Errorf("%s is %q, was %q (%v)", name, v, w.sysctls[name], err))
		}
	}
	if _, err := net.InterfaceByName(realNodeBridge); err == nil {
		errs = append(errs, fmt.Errorf("the real node's bridge %s is left", realNodeBridge))
	}
	for _, d := range hostDirs {
		if _, err := os.Stat(d); err == nil && !w.existed[d] {
			errs = append(errs, fmt.Errorf("%s is left", d))
		}
	}
	for _, family := range []string{"ip", "ip6"} {
		if exec.Command("nft", "list", "table", family, "kube-proxy").Run() == nil {
			errs = append(errs, fmt.Errorf("the real node's kube-proxy's nftables table %s kube-proxy is left", family))
		}
	}
	return errors.Join(append(errs, w.remove())...)
}

// kubepodsChildren lists the cgroups in /kubepods, in every hierarchy.
func kubepodsChildren() map[string]bool {
	children := map[string]bool{}
	for _, dir := range localcluster.CgroupDirs(hostCgroup) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				children[filepath.Join(dir, e.Name())] = true
			}
		}
	}
	return children
}

// remove stops the witness process and removes the cgroups the witness made.
func (w *hostWitness) remove() error {
	if w.proc != nil && w.proc.Process != nil {
		_ = w.proc.Process.Kill()
		_ = w.proc.Wait()
	}
	var errs []error
	for _, d := range w.created {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
