package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// lockedBuffer is the output of a command still running.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestKubectlLike: the plugin behaves as kubectl does where a kubectl runbook expects it to:
// -v=6 logs the requests; uncordon uncordons a node kubectl cordoned, ends the maintenance the
// plugin made for a node and says so, and leaves (naming it) one applied otherwise; status NODE
// finds a maintenance of another name that covers the node; list -w prints the maintenances as
// they change; complete --dry-run=server deletes nothing; and kubectl itself completes
// `kubectl maintenance <TAB>` with what `completion bash` prints.
func TestKubectlLike(t *testing.T) {
	framework.NewController(t).Start()
	noMaintenances(t)
	ctx := t.Context()
	node := "kwok-node-3"

	said, code := plugin(t, "-v=6", "list")
	if code != 0 {
		t.Errorf("-v=6 list: exit %d, want 0", code)
	}
	if !strings.Contains(said, `verb="GET"`) {
		t.Errorf("-v=6 list: output %q, want the requests' verbs logged", said)
	}
	if !strings.Contains(said, "/apis/nodemaint.dev/v1alpha1/nodemaintenances") {
		t.Errorf("-v=6 list: output %q, want the requests' paths logged", said)
	}

	// list -w: the maintenances, then each change.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watching := &lockedBuffer{}
	w := exec.CommandContext(watchCtx, filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance"), "--kubeconfig", framework.Cluster().Kubeconfig(), "list", "-w")
	w.Stdout, w.Stderr = watching, watching
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopWatch(); _ = w.Wait() }()

	// A node kubectl cordoned, with no maintenance: uncordon is kubectl's.
	if out, err := framework.Kubectl(t, "cordon", node); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	said, code = plugin(t, "uncordon", node)
	if code != 0 {
		t.Errorf("uncordon of a node kubectl cordoned: exit %d, want 0", code)
	}
	if !strings.Contains(said, "node/"+node+" uncordoned") {
		t.Errorf("uncordon of a node kubectl cordoned: output %q, want node/%s uncordoned", said, node)
	}
	if ok, err := unschedulable(ctx, node); err != nil || ok {
		t.Errorf("node %s still cordoned after uncordon (%v)", node, err)
	}

	// The plugin's own maintenance of the node: uncordon ends it, and says so; --dry-run=server
	// first, which changes nothing; list -w saw it come.
	if out, code := plugin(t, "cordon", node); code != 0 {
		t.Fatalf("cordon: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, timeout, "node cordoned", func(ctx context.Context) (bool, string, error) {
		ok, err := unschedulable(ctx, node)
		return ok, "", err
	})
	testutil.Eventually(t, timeout, "list -w prints the new maintenance", func(context.Context) (bool, string, error) {
		out := watching.String()
		return strings.Contains(out, "NAME ") && strings.Contains(out, "\n"+node+" "), out, nil
	})
	for _, args := range [][]string{{"uncordon", node, "--dry-run=server"}, {"complete", node, "--dry-run=server"}} {
		out, code := plugin(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, want 0", args, code)
		}
		if !strings.Contains(out, "(server dry run)") {
			t.Errorf("%v: output %q, want a server dry run", args, out)
		}
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, nm); err != nil || !nm.DeletionTimestamp.IsZero() {
		t.Errorf("NodeMaintenance %s after dry runs: %v, deleting %v", node, err, nm.DeletionTimestamp)
	}
	if ok, err := unschedulable(ctx, node); err != nil || !ok {
		t.Errorf("node %s uncordoned by a dry run (%v)", node, err)
	}
	said, code = plugin(t, "uncordon", node)
	if code != 0 {
		t.Errorf("uncordon of the plugin's maintenance: exit %d, want 0", code)
	}
	if !strings.Contains(said, "nodemaintenance.nodemaint.dev/"+node+" deleted: kubectl maintenance made it for node "+node) {
		t.Errorf("uncordon of the plugin's maintenance: output %q, want the maintenance ended, said", said)
	}
	noMaintenances(t)

	// A maintenance applied otherwise, of another name: status NODE finds it; uncordon leaves it,
	// naming it.
	applied := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "kernel-rack-7"}, Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
		Cordon: true, NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	create(t, applied)
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), applied); noMaintenances(t) })
	testutil.Eventually(t, timeout, "node cordoned by kernel-rack-7", func(ctx context.Context) (bool, string, error) {
		ok, err := unschedulable(ctx, node)
		return ok, "", err
	})
	said, code = plugin(t, "status", node)
	if code != 0 {
		t.Errorf("status %s: exit %d, want 0", node, code)
	}
	if !strings.Contains(said, "kernel-rack-7: phase") {
		t.Errorf("status %s: output %q, want kernel-rack-7, which covers it", node, said)
	}
	said, code = plugin(t, "uncordon", node)
	if code != 0 {
		t.Errorf("uncordon of a node in a maintenance applied otherwise: exit %d, want 0", code)
	}
	if !strings.Contains(said, "NodeMaintenance kernel-rack-7: kubectl maintenance complete --name kernel-rack-7") {
		t.Errorf("uncordon of a node in a maintenance applied otherwise: output %q, want kernel-rack-7 named", said)
	}
	if strings.Contains(said, "deleted") {
		t.Errorf("uncordon of a node in a maintenance applied otherwise: output %q, want kernel-rack-7 kept", said)
	}
	if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(applied), applied); err != nil || !applied.Spec.Cordon || !applied.DeletionTimestamp.IsZero() {
		t.Errorf("kernel-rack-7 after uncordon: %v, cordon %v, deleting %v; want it as it was", err, applied.Spec.Cordon, applied.DeletionTimestamp)
	}

	// kubectl completes `kubectl maintenance dr<TAB>` through what `completion bash` prints.
	dir := t.TempDir()
	script, code := pluginStdout(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-maintenance"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	kubectl := exec.Command(filepath.Join(framework.Cluster().BinDir(), "kubectl"), "__complete", "maintenance", "dr")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+framework.Cluster().Kubeconfig(),
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("NODEMAINT_BIN_DIR")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := kubectl.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\ndrain\t") {
		t.Errorf("kubectl __complete maintenance dr, with completion bash's output on the PATH: %v\n%s\nwant drain", err, out)
	}
}

// pluginStdout is plugin's standard output alone.
func pluginStdout(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance"), args...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}
