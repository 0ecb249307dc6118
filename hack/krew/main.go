// Command krew writes the krew plugin manifest of kubectl-maintenance (plugin "maintenance") for a
// release: one platform per release archive of the plugin named in the checksums file, with the
// archive's sha256. `make release` runs it:
//
//	go run ./hack/krew -version v0.2.0 -checksums _output/release/checksums.txt > _output/release/maintenance.yaml
//
// The manifest goes to the krew-index (plugins/maintenance.yaml) or a custom index.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The manifest types: krew's own (sigs.k8s.io/krew/pkg/index, v1alpha2). They are repeated here
// because importing krew's module would raise k8s.io/client-go to the v11.0.0+incompatible it
// requires.
type (
	Plugin struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        Metadata   `json:"metadata"`
		Spec            PluginSpec `json:"spec"`
	}
	// Metadata is the part of metav1.ObjectMeta a manifest has (metav1.ObjectMeta would add
	// creationTimestamp: null).
	Metadata struct {
		Name string `json:"name"`
	}
	PluginSpec struct {
		Version          string     `json:"version,omitempty"`
		ShortDescription string     `json:"shortDescription,omitempty"`
		Description      string     `json:"description,omitempty"`
		Caveats          string     `json:"caveats,omitempty"`
		Homepage         string     `json:"homepage,omitempty"`
		Platforms        []Platform `json:"platforms,omitempty"`
	}
	Platform struct {
		URI      string                `json:"uri,omitempty"`
		Sha256   string                `json:"sha256,omitempty"`
		Selector *metav1.LabelSelector `json:"selector,omitempty"`
		Files    []FileOperation       `json:"files"`
		Bin      string                `json:"bin"`
	}
	FileOperation struct {
		From string `json:"from,omitempty"`
		To   string `json:"to,omitempty"`
	}
)

const (
	pluginName = "maintenance"
	binary     = "kubectl-maintenance"
	// completion is kubectl's completion of the plugin (hack/plugin), in its archives beside it.
	completion = "kubectl_complete-maintenance"
	repository = "https://github.com/nodemaint/nodemaint"
)

// archiveName matches the plugin's release archives: kubectl-maintenance_<version>_<os>_<arch>.tar.gz.
var archiveName = regexp.MustCompile(`^` + binary + `_(.+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

// Checksum is one line of a sha256sum file.
type Checksum struct{ Sha256, File string }

// ReadChecksums reads a file in the format of sha256sum: "<64 hex digits>  <file name>" per line.
func ReadChecksums(r io.Reader) ([]Checksum, error) {
	var sums []Checksum
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if line == "" {
			continue
		}
		sum, file, ok := strings.Cut(line, "  ")
		if !ok {
			// sha256sum --binary writes "<sum> *<file>".
			sum, file, ok = strings.Cut(line, " *")
		}
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || file == "" {
			return nil, fmt.Errorf("line %d: %q is not a sha256sum line", n, line)
		}
		sums = append(sums, Checksum{Sha256: sum, File: file})
	}
	return sums, s.Err()
}

// Manifest returns the plugin manifest of the release version, whose archives are downloaded
// from downloadBase/<archive>: a platform for each plugin archive of that version in sums.
func Manifest(version, downloadBase string, sums []Checksum) (*Plugin, error) {
	if !strings.HasPrefix(version, "v") {
		return nil, fmt.Errorf("version %q: krew needs a semantic version with a leading v", version)
	}
	p := &Plugin{
		TypeMeta: metav1.TypeMeta{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"},
		Metadata: Metadata{Name: pluginName},
		Spec: PluginSpec{
			Version:          version,
			Homepage:         repository,
			ShortDescription: "Cordon, drain and complete nodes declaratively (NodeMaintenance)",
			Description: `Creates and edits NodeMaintenances (nodemaint.dev/v1alpha1), follows their
progress and names what blocks a drain. Pod owners that can move their pods
without downtime (Deployments with maxSurge) do so; the rest are evicted
through their PodDisruptionBudgets. Fleet rollouts take nodes a few at a
time, in a maintenance window, and halt when replacements cannot be placed.
`,
			Caveats: `This plugin needs nodemaint-controller and its CRDs in the cluster (the
Helm chart charts/nodemaint or the kustomize base config/default); see
` + repository + `/blob/main/docs/user-guide.md

For TAB completion of node and maintenance names, put kubectl_complete-maintenance
on your PATH:
  ln -s ~/.krew/store/maintenance/` + version + `/` + completion + ` ~/.krew/bin/
`,
		},
	}
	for _, s := range sums {
		m := archiveName.FindStringSubmatch(s.File)
		if m == nil || m[1] != version {
			continue
		}
		p.Spec.Platforms = append(p.Spec.Platforms, Platform{
			URI:      strings.TrimSuffix(downloadBase, "/") + "/" + s.File,
			Sha256:   s.Sha256,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": m[2], "arch": m[3]}},
			Files:    []FileOperation{{From: binary, To: "."}, {From: "LICENSE", To: "."}, {From: completion, To: "."}},
			Bin:      binary,
		})
	}
	if len(p.Spec.Platforms) == 0 {
		return nil, fmt.Errorf("no %s_%s_<os>_<arch>.tar.gz in the checksums", binary, version)
	}
	slices.SortFunc(p.Spec.Platforms, func(a, b Platform) int { return strings.Compare(a.URI, b.URI) })
	return p, nil
}

func main() {
	version := flag.String("version", "", "The release's version (a git tag such as v0.2.0).")
	checksums := flag.String("checksums", "", "The release's checksums file (sha256sum format).")
	download := flag.String("download-url", "", "Where the archives are downloaded from (default: the GitHub release of -version).")
	flag.Parse()
	if err := run(*version, *checksums, *download, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

func run(version, checksums, download string, out io.Writer) error {
	if version == "" || checksums == "" {
		return fmt.Errorf("-version and -checksums are required")
	}
	if download == "" {
		download = repository + "/releases/download/" + version
	}
	f, err := os.Open(checksums)
	if err != nil {
		return err
	}
	defer f.Close()
	sums, err := ReadChecksums(f)
	if err != nil {
		return fmt.Errorf("%s: %w", checksums, err)
	}
	p, err := Manifest(version, download, sums)
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}
