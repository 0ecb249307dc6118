package invariants

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// auditPoll is how often the checker reads what the API server appended to its audit log, and
// judges the acts whose settle passed.
const auditPoll = 200 * time.Millisecond

// auditTail reads the audit log from its beginning (the history of cordons and asks) and then
// follows it, across the API server's restarts (it appends) and rotations (the file at path is
// a new one: the old one is read to its end first).
type auditTail struct {
	path string
	// machinesOnly: the log of another cluster, the Machines' (ClusterAPI.AuditLog): only the
	// Machines' writes are read from it.
	machinesOnly bool

	mu      sync.Mutex
	f       *os.File
	r       *bufio.Reader
	partial []byte
	// lines, bad count the lines read and those that did not parse; bytes the bytes read.
	lines, bad, bytes int
}

// runAudit follows the audit log and judges the acts until the checker stops.
func (c *Checker) runAudit() {
	t := time.NewTicker(auditPoll)
	defer t.Stop()
	for {
		c.readAudit()
		c.mu.Lock()
		c.state.judgeAudit(time.Now())
		c.mu.Unlock()
		select {
		case <-c.ctx.Done():
			for _, a := range []*auditTail{c.audit, c.machineAudit} {
				if a == nil {
					continue
				}
				a.mu.Lock()
				if a.f != nil {
					a.f.Close()
				}
				a.mu.Unlock()
			}
			return
		case <-t.C:
		}
	}
}

// readAudit reads the complete lines appended to the audit logs since the last read and records
// them.
func (c *Checker) readAudit() {
	c.readTail(c.audit)
	if c.machineAudit != nil {
		c.readTail(c.machineAudit)
	}
}

// readTail reads the complete lines appended to one audit log since the last read and records
// them.
func (c *Checker) readTail(a *auditTail) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if a.f == nil {
			f, err := os.Open(a.path)
			if err != nil {
				return // not written yet
			}
			a.f, a.r = f, bufio.NewReaderSize(f, 1<<20)
		}
		chunk, err := a.r.ReadBytes('\n')
		a.bytes += len(chunk)
		a.partial = append(a.partial, chunk...)
		if err == nil {
			line := bytes.TrimSpace(a.partial)
			a.partial = a.partial[:0]
			if len(line) == 0 {
				continue
			}
			a.lines++
			c.mu.Lock()
			if c.state.auditLine(line, a.machinesOnly) != nil {
				a.bad++
			}
			c.mu.Unlock()
			continue
		}
		if !errors.Is(err, io.EOF) || len(a.partial) > 0 || !rotated(a.f, a.path) {
			return
		}
		// Rotated: the old file is read to its end; follow the new one.
		a.f.Close()
		a.f = nil
	}
}

// rotated reports whether path names another file than f.
func rotated(f *os.File, path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	cur, err := f.Stat()
	if err != nil {
		return true
	}
	a, ok1 := st.Sys().(*syscall.Stat_t)
	b, ok2 := cur.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && a.Ino != b.Ino
}

// AuditStats returns the audit log lines the checker read (and of those, the ones that did not
// parse), its bytes, and the acts of nodemaint's it judged: a test can assert that it judged
// something. All zero without Options.AuditLog.
func (c *Checker) AuditStats() (lines, bad, bytes, judged int) {
	if c.audit == nil {
		return 0, 0, 0, 0
	}
	c.audit.mu.Lock()
	lines, bad, bytes = c.audit.lines, c.audit.bad, c.audit.bytes
	c.audit.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	return lines, bad, bytes, c.state.acts.judged
}

// actInformers returns the informers the act checks need: namespaces (for DrainRules'
// namespaceSelectors), and where nodemaint's CRDs are served, NodeMaintenances and DrainRules
// (through the dynamic client: the objects are converted to api/v1alpha1 types by JSON, as the
// controller reads them).
func (c *Checker) actInformers(client kubernetes.Interface) ([]cache.SharedIndexInformer, error) {
	infs := []cache.SharedIndexInformer{c.informer(listWatch(client.CoreV1().Namespaces()), &corev1.Namespace{})}
	if _, err := client.Discovery().ServerResourcesForGroupVersion(nodemaintv1alpha1.GroupVersion.String()); err != nil {
		if apierrors.IsNotFound(err) {
			return infs, nil // no CRDs: no maintenance drains anything, only the cordon is judged
		}
		return nil, err
	}
	for _, resource := range []string{"nodemaintenances", "drainrules"} {
		api := c.dynamic.Resource(nodemaintv1alpha1.GroupVersion.WithResource(resource))
		infs = append(infs, c.informer(listWatch(api), &unstructured.Unstructured{}))
	}
	return infs, nil
}

// custom records a NodeMaintenance, DrainRule or Machine the dynamic informers delivered.
func (s *state) custom(u *unstructured.Unstructured, deleted bool, now time.Time) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return
	}
	switch u.GetKind() {
	case "NodeMaintenance":
		var nm nodemaintv1alpha1.NodeMaintenance
		if json.Unmarshal(b, &nm) == nil {
			s.nodeMaintenance(&nm, deleted, now)
			s.alertTurns(&nm, deleted, now)
			s.machineMaintenance(&nm, deleted, now)
		}
	case "Machine":
		s.machine(b, deleted, now)
	case "DrainRule":
		var r nodemaintv1alpha1.DrainRule
		if json.Unmarshal(b, &r) == nil {
			s.drainRule(&r, deleted)
		}
	}
}
