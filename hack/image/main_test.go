package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestIndex: the layout make image writes holds one index tagged with the version, one image per
// architecture with its platform, the same base layer under each, the image's user, entrypoint
// and labels; and the same input writes the same digest.
func TestIndex(t *testing.T) {
	created := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(out string) string {
		base, err := baseLayer(ca, created)
		if err != nil {
			t.Fatal(err)
		}
		bins := map[string][]byte{"amd64": []byte("amd64 binary"), "arm64": []byte("arm64 binary")}
		idx, err := index(base, []string{"amd64", "arm64"}, bins, "v0.2.0", "abc", created)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(out, idx, repository, "v0.2.0"); err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	out := filepath.Join(t.TempDir(), "image")
	first := build(out)
	if again := build(out); again != first {
		t.Errorf("digest %s, then %s: not reproducible", first, again)
	}

	root, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := root.IndexManifest()
	if err != nil || len(outer.Manifests) != 1 || outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.2.0" || outer.Manifests[0].Digest.String() != first {
		t.Fatalf("layout index %+v, %v: want the image index %s tagged v0.2.0", outer, err, first)
	}
	// Named as containerd's exports name an image, which ctr images import keeps.
	if got, want := outer.Manifests[0].Annotations["io.containerd.image.name"], "ghcr.io/nodemaint/nodemaint-controller:v0.2.0"; got != want {
		t.Errorf("the layout names the image %q, want %q", got, want)
	}
	idx, err := root.ImageIndex(outer.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var baseDigests []string
	for i, arch := range []string{"amd64", "arm64"} {
		m := im.Manifests[i]
		if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != arch {
			t.Fatalf("manifest %d: platform %+v, want linux/%s", i, m.Platform, arch)
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.Config.User != user || cfg.Config.Entrypoint[0] != entrypoint || cfg.Config.Labels["org.opencontainers.image.version"] != "v0.2.0" || cfg.Config.Labels["org.opencontainers.image.revision"] != "abc" {
			t.Errorf("linux/%s config %+v", arch, cfg)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("linux/%s: %d layers, %v: want the base and the binary", arch, len(layers), err)
		}
		d, err := layers[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		baseDigests = append(baseDigests, d.String())
	}
	if baseDigests[0] != baseDigests[1] {
		t.Errorf("base layers %v: want one base for every platform", baseDigests)
	}
}
