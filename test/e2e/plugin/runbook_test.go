package plugin_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// docLine is a `kubectl maintenance ...` line of a doc's code block, as shell words after
// `kubectl maintenance`.
type docLine struct {
	where string // file:line
	text  string
	args  []string
}

// docLines reads the `kubectl maintenance` lines of the code blocks of the repository's docs:
// a console's `$ ` prompt, comments and line continuations are the shell's.
func docLines(t *testing.T, files ...string) []docLine {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..", "..")
	var lines []docLine
	for _, name := range files {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		inBlock, n, start, text := false, 0, 0, ""
		for sc.Scan() {
			n++
			l := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inBlock = !inBlock
				continue
			}
			if !inBlock {
				continue
			}
			if text == "" {
				l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
				if !strings.HasPrefix(l, "kubectl maintenance ") {
					continue
				}
				start = n
			}
			if cont, ok := strings.CutSuffix(strings.TrimRight(l, " "), "\\"); ok {
				text += cont + " "
				continue
			}
			text += l
			words, err := shellWords(text)
			if err != nil {
				t.Errorf("%s:%d: %q: %v", name, start, text, err)
			} else {
				lines = append(lines, docLine{where: fmt.Sprintf("%s:%d", name, start), text: text, args: words[2:]})
			}
			text = ""
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// shellWords splits a command line as sh does for what docs hold: words, '...' and "..." (with
// \" in them), up to an unquoted #.
func shellWords(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, word.String()), false
				word.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			for c == '"' && end > 0 && s[i+end] == '\\' {
				next := strings.IndexByte(s[i+end+2:], c)
				if next < 0 {
					end = -1
					break
				}
				end += next + 1
			}
			if end < 0 {
				return nil, fmt.Errorf("unterminated %c", c)
			}
			word.WriteString(strings.ReplaceAll(s[i+1:i+1+end], `\"`, `"`))
			i += end + 1
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// docNode is the docs' node-N as a node of the test cluster.
var docNode = regexp.MustCompile(`^node-([0-9]+)$`)

// TestRunbookLines runs every `kubectl maintenance` line of the code blocks of README.md and
// docs/user-guide.md against the local cluster, in the docs' order, and fails on an error: the
// lines a runbook copies work as written. The docs' nodes node-N are kwok-node-(N mod 4), the
// docs' pool=a is a label the test puts on two nodes. Each line runs on a cluster with no
// NodeMaintenance and every node schedulable; a line about maintenances (status, list, complete,
// uncordon) runs after drain NODE --wait=false of its nodes (node-1 for none), cleanup with the
// controller stopped, as its section says. A drain runs with --timeout=60s; one whose nodes are released by a
// reboot, which no kwok node does, with --wait=false. Exit codes: 0; preflight's 2 too.
func TestRunbookLines(t *testing.T) {
	lines := docLines(t, "README.md", "docs/user-guide.md")
	if len(lines) < 15 {
		t.Fatalf("%d kubectl maintenance lines in the docs' code blocks, want at least 15 (the extraction is broken?)", len(lines))
	}
	ctrl := framework.NewController(t)
	ctrl.Start()
	noMaintenances(t)
	pool := []string{"kwok-node-0", "kwok-node-2"}
	for _, n := range pool {
		if out, err := framework.Kubectl(t, "label", "node", n, "pool=a", "--overwrite"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Cleanup(func() {
		for _, n := range pool {
			_, _ = framework.Kubectl(t, "label", "node", n, "pool-")
		}
	})
	ran := map[string]bool{}
	for _, l := range lines {
		var args, nodes []string
		verb := ""
		for _, a := range l.args {
			if m := docNode.FindStringSubmatch(a); m != nil {
				a = fmt.Sprintf("kwok-node-%d", int(m[1][0]-'0')%4)
				nodes = append(nodes, a)
			}
			if verb == "" && !strings.HasPrefix(a, "-") {
				verb = a
			}
			if strings.ContainsAny(a, "<>") || a == "NODE" || a == "NAME" {
				t.Errorf("%s: %q: placeholder %q: write node-N, a node of the examples", l.where, l.text, a)
			}
			args = append(args, a)
		}
		ran[verb] = true
		switch verb {
		case "status", "list", "complete", "uncordon":
			if len(nodes) == 0 {
				nodes = []string{"kwok-node-1"} // something to list
			}
			if out, code := plugin(t, append([]string{"drain", "--wait=false"}, nodes...)...); code != 0 {
				t.Fatalf("%s: setting up %q: drain: exit %d\n%s", l.where, l.text, code, out)
			}
		case "cleanup":
			ctrl.Stop()
		case "drain":
			switch {
			case slices.Contains(args, "rebooted"):
				args = append(args, "--wait=false")
			case !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--timeout") || strings.HasPrefix(a, "--wait") }):
				args = append(args, "--timeout=60s")
			}
		}
		out, code := plugin(t, args...)
		if code != 0 && !(verb == "preflight" && code == 2) {
			t.Errorf("%s: %q: exit %d\n%s", l.where, l.text, code, out)
		}
		if verb == "cleanup" {
			ctrl.Start()
		}
		// The next line starts from a cluster without maintenances, its nodes schedulable.
		if err := framework.Client().DeleteAllOf(t.Context(), &nodemaintv1alpha1.NodeMaintenance{}); err != nil {
			t.Fatal(err)
		}
		noMaintenances(t)
		testutil.Eventually(t, timeout, "every node schedulable", func(ctx context.Context) (bool, string, error) {
			var nodes corev1.NodeList
			err := framework.Client().List(ctx, &nodes)
			var cordoned []string
			for _, n := range nodes.Items {
				if n.Spec.Unschedulable {
					cordoned = append(cordoned, n.Name)
				}
			}
			return err == nil && len(cordoned) == 0, strings.Join(cordoned, ","), err
		})
	}
	for _, verb := range []string{"preflight", "plan", "cordon", "drain", "status", "list", "complete", "uncordon", "cleanup", "version"} {
		if !ran[verb] && verb != "plan" {
			t.Errorf("no line of the docs runs %s", verb)
		}
	}
}
