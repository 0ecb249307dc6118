package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// run runs the plugin's root command with args against no cluster; it returns the output and
// the error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", "/nonexistent"))
	err := cmd.Execute()
	return out.String(), err
}

// TestVerbosityFlag: -v and --v are kubectl's verbosity (klog's level), not --version: kubectl's
// `-v=6` runs the command; the version is `version` or `--version`.
func TestVerbosityFlag(t *testing.T) {
	for _, args := range [][]string{{"-v=6", "version"}, {"--v=6", "version"}, {"version", "-v", "4"}} {
		out, err := run(t, args...)
		if err != nil || !strings.HasPrefix(out, "kubectl-maintenance ") {
			t.Errorf("%v: %q, %v; want the version line", args, out, err)
		}
	}
	cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	cmd.SetArgs([]string{"version", "-v=6"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	v := cmd.PersistentFlags().Lookup("v")
	if v == nil {
		t.Fatal("-v=6: no flag v, want klog's v")
	}
	if v.Shorthand != "v" {
		t.Errorf("-v=6: flag shorthand %q, want klog's v", v.Shorthand)
	}
	if got := v.Value.String(); got != "6" {
		t.Errorf("-v=6: flag at %s, want 6", got)
	}
}

// walk calls f on the command and every command below it.
func walk(cmd *cobra.Command, f func(*cobra.Command)) {
	f(cmd)
	for _, c := range cmd.Commands() {
		walk(c, f)
	}
}

// TestNoNamespaceFlag: nodes and NodeMaintenances are cluster-scoped, so no command offers -n.
func TestNoNamespaceFlag(t *testing.T) {
	root := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	walk(root, func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags(), c.PersistentFlags()} {
			if fs.Lookup("namespace") != nil {
				t.Errorf("%s offers --namespace", c.CommandPath())
			}
			if fs.ShorthandLookup("n") != nil {
				t.Errorf("%s offers -n", c.CommandPath())
			}
		}
	})
	if _, err := run(t, "list", "-n", "default"); err == nil || !strings.Contains(err.Error(), "unknown shorthand flag: 'n'") {
		t.Errorf("list -n default: %v, want -n refused", err)
	}
}

// TestDryRunFlags: every command that writes takes kubectl's --dry-run: none, client or server;
// --dry-run alone (and kubectl's old booleans) is client.
func TestDryRunFlags(t *testing.T) {
	for _, verb := range []string{"plan", "cordon", "drain", "complete", "uncordon", "cleanup"} {
		for arg, want := range map[string]cmdutil.DryRunStrategy{
			"--dry-run": cmdutil.DryRunClient, "--dry-run=client": cmdutil.DryRunClient, "--dry-run=server": cmdutil.DryRunServer,
			"--dry-run=none": cmdutil.DryRunNone, "--dry-run=true": cmdutil.DryRunClient, "--dry-run=false": cmdutil.DryRunNone,
		} {
			root := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
			cmd, rest, err := root.Find(args(verb, arg))
			if err != nil {
				t.Fatalf("%s: %v", verb, err)
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s %s: %v", verb, arg, err)
				continue
			}
			if got, err := cmdutil.GetDryRunStrategy(cmd); err != nil || got != want {
				t.Errorf("%s %s: %v, %v; want %v", verb, arg, got, err, want)
			}
		}
		if _, err := run(t, args(verb, "--dry-run=maybe")...); err == nil || !strings.Contains(err.Error(), `Invalid dry-run value (maybe)`) {
			t.Errorf("%s --dry-run=maybe: %v, want it refused", verb, err)
		}
	}
}

// args is a command line of the verb: a node, but for cleanup, which takes none.
func args(verb, flag string) []string {
	if verb == "cleanup" {
		return []string{verb, flag}
	}
	return []string{verb, "node-1", flag}
}

// TestOutputFlags: list takes kubectl get's flags (-A, -l, -w, --no-headers, -o wide/name/...),
// status -o wide as the README shows it, and version and preflight take -o as cli-runtime's
// printers do (jsonpath too); an -o no printer takes is refused before the cluster is read.
func TestOutputFlags(t *testing.T) {
	for _, args := range [][]string{
		{"list", "-A", "-l", "app=x", "-w", "--no-headers", "-o", "wide"},
		{"list", "-o", "name", "--show-labels"},
		{"list", "-o", "custom-columns=NAME:.metadata.name"},
		{"status", "-o", "wide"},
		{"status", "node-1", "-o", "jsonpath={.spec.cordon}"},
		{"preflight", "node-1", "-o", "yaml"},
		{"preflight", "node-1", "-o", "jsonpath={.nodes[0].name}"},
	} {
		// Parsed and accepted: what fails is reading the cluster, which does not exist.
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "/nonexistent") {
			t.Errorf("%v: %v, want only the missing kubeconfig refused", args, err)
		}
	}
	if out, err := run(t, "version", "-o", "jsonpath={.version}"); err != nil || out == "" || strings.Contains(out, "{") {
		t.Errorf("version -o jsonpath: %q, %v", out, err)
	}
	for _, args := range [][]string{{"list", "-o", "table"}, {"status", "-o", "csv"}, {"preflight", "node-1", "-o", "wide"}, {"version", "-o", "wide"}} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "unable to match a printer suitable for the output format") {
			t.Errorf("%v: %v, want -o refused", args, err)
		}
	}
}

// TestCompletionCommand: `completion bash` prints kubectl_complete-maintenance, with which
// kubectl completes `kubectl maintenance <TAB>`, not a script completing a command named
// kubectl-maintenance, which nobody types.
func TestCompletionCommand(t *testing.T) {
	want, err := os.ReadFile("../../hack/plugin/kubectl_complete-maintenance")
	if err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := run(t, "completion", shell)
		if err != nil || out != string(want) {
			t.Errorf("completion %s: %v\n%s\nwant hack/plugin/kubectl_complete-maintenance:\n%s", shell, err, out, want)
		}
	}
}
