package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nodemaint/nodemaint/internal/version"
)

// Both `kubectl maintenance --version` and `kubectl maintenance version` print the version and
// the commit, without a cluster; `version -o json` prints them as JSON.
func TestVersion(t *testing.T) {
	want := "kubectl-maintenance " + version.Get().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}

	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"version", "-o", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var got version.Info
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out.String())
	}
	if got != version.Get() {
		t.Errorf("version -o json = %+v, want %+v", got, version.Get())
	}
	if got.Version == "" {
		t.Errorf("version -o json = %+v, want a version", got)
	}
	if got.Commit == "" {
		t.Errorf("version -o json = %+v, want a commit", got)
	}
}
