// Command installer writes install.yaml, the whole install in one file (kubebuilder's
// build-installer), for `make release`: config/default built with kustomize, the controller's
// image tagged with the release version.
//
//	go run ./hack/installer -version v0.2.0 > install.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// image is the controller's image name in config/manager.
const image = "ghcr.io/nodemaint/nodemaint-controller"

func main() {
	version := flag.String("version", "", "the release version, the image's tag (v0.2.0)")
	config := flag.String("config", "config/default", "the kustomization to build")
	flag.Parse()
	if *version == "" {
		fmt.Fprintln(os.Stderr, "installer: -version is needed")
		os.Exit(2)
	}
	out, err := build(*config, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "installer:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// build builds the kustomization at dir with the controller's image tagged version, through an
// overlay in a temporary directory: the repository's files stay as they are.
func build(dir, version string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	overlay, err := os.MkdirTemp("", "nodemaint-installer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(overlay)
	// kustomize takes relative bases only.
	base, err := filepath.Rel(overlay, abs)
	if err != nil {
		return nil, err
	}
	kustomization := fmt.Sprintf("resources:\n- %s\nimages:\n- name: %s\n  newTag: %s\n", base, image, version)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}
