package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

func sum(c byte) string { return strings.Repeat(string(c), 64) }

const checksums = `` +
	"1111111111111111111111111111111111111111111111111111111111111111  kubectl-maintenance_v0.2.0_darwin_amd64.tar.gz\n" +
	"2222222222222222222222222222222222222222222222222222222222222222  kubectl-maintenance_v0.2.0_darwin_arm64.tar.gz\n" +
	"3333333333333333333333333333333333333333333333333333333333333333  kubectl-maintenance_v0.2.0_linux_amd64.tar.gz\n" +
	"4444444444444444444444444444444444444444444444444444444444444444  kubectl-maintenance_v0.2.0_linux_arm64.tar.gz\n" +
	"5555555555555555555555555555555555555555555555555555555555555555  nodemaint-controller_v0.2.0_linux_amd64.tar.gz\n" +
	"6666666666666666666666666666666666666666666666666666666666666666  kubectl-maintenance_v0.1.0_linux_amd64.tar.gz\n"

// The manifest `make release` writes: one platform per plugin archive of the version, with its
// sha256 and download URL, valid by krew's rules, and strictly the v1alpha2 schema.
func TestManifest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checksums.txt")
	if err := os.WriteFile(path, []byte(checksums), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run("v0.2.0", path, "", &out); err != nil {
		t.Fatal(err)
	}
	var p Plugin
	if err := yaml.UnmarshalStrict(out.Bytes(), &p); err != nil {
		t.Fatalf("the manifest does not decode strictly: %v\n%s", err, out.String())
	}
	if err := validatePlugin(pluginName, p); err != nil {
		t.Fatalf("krew would refuse the manifest: %v\n%s", err, out.String())
	}
	want := map[string]string{
		"darwin/amd64": sum('1'), "darwin/arm64": sum('2'), "linux/amd64": sum('3'), "linux/arm64": sum('4'),
	}
	if len(p.Spec.Platforms) != len(want) {
		t.Fatalf("%d platforms, want %d:\n%s", len(p.Spec.Platforms), len(want), out.String())
	}
	for _, pl := range p.Spec.Platforms {
		osArch := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		if pl.Sha256 != want[osArch] {
			t.Errorf("%s: sha256 %s, want %s", osArch, pl.Sha256, want[osArch])
		}
		wantURI := fmt.Sprintf("https://github.com/nodemaint/nodemaint/releases/download/v0.2.0/kubectl-maintenance_v0.2.0_%s.tar.gz", strings.ReplaceAll(osArch, "/", "_"))
		if pl.URI != wantURI {
			t.Errorf("%s: uri %s, want %s", osArch, pl.URI, wantURI)
		}
		if pl.Bin != "kubectl-maintenance" {
			t.Errorf("%s: bin %q", osArch, pl.Bin)
		}
	}
	if p.Spec.Version != "v0.2.0" {
		t.Errorf("version %q", p.Spec.Version)
	}
}

func TestManifestRefuses(t *testing.T) {
	sums, err := ReadChecksums(strings.NewReader(checksums))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Manifest("0.2.0", "https://example.com", sums); err == nil {
		t.Error("a version without a leading v was accepted")
	}
	if _, err := Manifest("v0.3.0", "https://example.com", sums); err == nil {
		t.Error("a version without archives was accepted")
	}
	for _, bad := range []string{
		"1111  kubectl-maintenance_v0.2.0_linux_amd64.tar.gz\n",
		sum('x') + "  kubectl-maintenance_v0.2.0_linux_amd64.tar.gz\n",
		sum('1') + " kubectl-maintenance_v0.2.0_linux_amd64.tar.gz\n",
	} {
		if _, err := ReadChecksums(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadChecksums accepted %q", bad)
		}
	}
	if s, err := ReadChecksums(strings.NewReader(sum('a') + " *file.tar.gz\n")); err != nil || len(s) != 1 || s[0].File != "file.tar.gz" {
		t.Errorf("binary-mode line: %v, %v", s, err)
	}
}

// validatePlugin is krew's own check of a manifest (sigs.k8s.io/krew v0.4.3,
// internal/index/validation.ValidatePlugin, which `krew install --manifest` and the krew-index CI
// run), repeated because that package is internal to krew.
func validatePlugin(name string, p Plugin) error {
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" {
		return fmt.Errorf("apiVersion %q", p.APIVersion)
	}
	if p.Kind != "Plugin" {
		return fmt.Errorf("kind %q", p.Kind)
	}
	if !regexp.MustCompile(`^[\w-]+$`).MatchString(name) || p.Metadata.Name != name {
		return fmt.Errorf("name %q, want %q", p.Metadata.Name, name)
	}
	if p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n") {
		return fmt.Errorf("short description %q: needed, on one line", p.Spec.ShortDescription)
	}
	if len(p.Spec.Platforms) == 0 {
		return fmt.Errorf("no platforms")
	}
	// krew's semver.Parse: a leading v, then a semantic version.
	if !strings.HasPrefix(p.Spec.Version, "v") {
		return fmt.Errorf("version %q has no leading v", p.Spec.Version)
	}
	if _, err := version.ParseSemantic(strings.TrimPrefix(p.Spec.Version, "v")); err != nil {
		return fmt.Errorf("version %q: %w", p.Spec.Version, err)
	}
	seen := map[string]bool{}
	for _, pl := range p.Spec.Platforms {
		if pl.URI == "" || !regexp.MustCompile(`^[a-f0-9]{64}$`).MatchString(pl.Sha256) || pl.Bin == "" {
			return fmt.Errorf("platform %+v: uri, a sha256 of 64 hex digits and bin are needed", pl)
		}
		if pl.Files != nil && len(pl.Files) == 0 {
			return fmt.Errorf("platform %s: files empty", pl.URI)
		}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				return fmt.Errorf("platform %s: file operation %+v", pl.URI, f)
			}
		}
		sel := pl.Selector
		if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
			return fmt.Errorf("platform %s: no selector", pl.URI)
		}
		for k := range sel.MatchLabels {
			if k != "os" && k != "arch" {
				return fmt.Errorf("platform %s: selector key %q", pl.URI, k)
			}
		}
		key := sel.MatchLabels["os"] + "/" + sel.MatchLabels["arch"]
		if seen[key] {
			return fmt.Errorf("platform %s: a second platform for %s", pl.URI, key)
		}
		seen[key] = true
	}
	return nil
}
