// Package version holds the version and commit of nodemaint's binaries. `make release` sets them
// with -ldflags "-X github.com/nodemaint/nodemaint/internal/version.version=v0.3.0
// -X github.com/nodemaint/nodemaint/internal/version.commit=<sha>"; a binary built with plain
// `go build` or `go install` falls back to what the Go toolchain recorded (the module version, and
// vcs.revision / vcs.modified when built from a git checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X); empty in a plain build.
var (
	version string
	commit  string
)

// Info is what a binary says of itself with --version.
type Info struct {
	// Version is the release (v0.3.0), the module version of `go install ...@v0.3.0`, or "devel".
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, with "-dirty" when the work tree had
	// changes (build info only), or "unknown".
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, bi)
}

// get is Get with the linker's values and the build info as arguments, for tests.
func get(ldVersion, ldCommit string, bi *debug.BuildInfo) Info {
	info := Info{Version: ldVersion, Commit: ldCommit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			var revision string
			var modified bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					revision = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if revision != "" && modified {
				revision += "-dirty"
			}
			info.Commit = revision
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// String is the one line --version prints: "nodemaint v0.3.0 (commit 1a2b3c4..., go1.26.0, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}

// Line is what `<binary> --version` prints: the binary's name and its Info.
func Line(binary string) string { return binary + " " + Get().String() }
