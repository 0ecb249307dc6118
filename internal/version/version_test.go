package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/nodemaint/nodemaint", Version: "(devel)"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}},
	}
	installed := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.4.1"}}
	for _, tc := range []struct {
		name                    string
		ldVersion, ldCommit     string
		bi                      *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{"ldflags win over build info", "v0.3.0", "feedbeef", vcs, "v0.3.0", "feedbeef"},
		{"git checkout, go build", "", "", vcs, "devel", "0123abcd-dirty"},
		{"go install @version", "", "", installed, "v0.4.1", "unknown"},
		{"no build info", "", "", nil, "devel", "unknown"},
		{"version without commit", "v0.3.0", "", vcs, "v0.3.0", "0123abcd-dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.ldVersion, tc.ldCommit, tc.bi)
			if got.Version != tc.wantVersion || got.Commit != tc.wantCommit {
				t.Errorf("get() = %+v, want version %q commit %q", got, tc.wantVersion, tc.wantCommit)
			}
			if got.GoVersion == "" || got.Platform == "" {
				t.Errorf("get() = %+v: no Go version or platform", got)
			}
		})
	}
}

// TestLinkerFlags builds a program with the -X flags `make release` passes (the variables'
// import paths, which the Makefile spells out) and checks that --version shows them.
func TestLinkerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	ldflags := "-X github.com/nodemaint/nodemaint/internal/version.version=v9.8.7 " +
		"-X github.com/nodemaint/nodemaint/internal/version.commit=0123456789abcdef"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./testdata/printversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "printversion v9.8.7 (commit 0123456789abcdef, "
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("output %q, want prefix %q", out, want)
	}
}
