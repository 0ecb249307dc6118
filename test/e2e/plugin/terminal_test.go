package plugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// TestLiveDisplayInTerminal runs drain in a real terminal (tmux) and reads the screen: on a
// terminal the progress is a table redrawn in place, not a scroll of lines.
func TestLiveDisplayInTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is needed for this test (.ci/run installs it): %v", err)
	}
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	node := "kwok-node-3"
	slow := pod(ns, "slow", node, nil)
	slow.Annotations = map[string]string{localcluster.PodDeleteDelayAnnotation: "6s"}
	create(t, slow, pod(ns, "quick", node, nil))
	waitReady(t, ns, 2)

	socket := fmt.Sprintf("nodemaint-e2e-%d", os.Getpid())
	run := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-L", socket}, args...)...).CombinedOutput()
		return string(out), err
	}
	bin := filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance")
	shell := fmt.Sprintf("%s --kubeconfig %s drain %s --timeout 60s --response-timeout 2s; echo exit=$?; sleep 600", bin, framework.Cluster().Kubeconfig(), node)
	if out, err := run("new-session", "-d", "-s", "drain", "-x", "160", "-y", "40", shell); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = run("kill-server") })

	var screen string
	testutil.Eventually(t, 2*time.Minute, "drain finished on the terminal", func(ctx context.Context) (bool, string, error) {
		var err error
		screen, err = run("capture-pane", "-p", "-t", "drain")
		return strings.Contains(screen, "exit="), screen, err
	})
	t.Logf("the terminal at the end:\n%s", screen)
	if !strings.Contains(screen, "exit=0") {
		t.Errorf("drain did not finish with exit 0 on the terminal")
	}
	if !strings.Contains(screen, "drained") {
		t.Errorf("drain did not say drained on the terminal")
	}
	// One frame on screen, however many updates there were: the table was redrawn in place.
	if n := strings.Count(screen, "NODE "); n != 1 {
		t.Errorf("%d node tables on the screen; want one frame redrawn in place", n)
	}
	if !strings.Contains(screen, node) {
		t.Errorf("the frame does not show the node %s", node)
	}
	if !strings.Contains(screen, "PENDING") {
		t.Errorf("the frame does not show the node table's PENDING column")
	}
}
