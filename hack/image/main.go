// Command image builds nodemaint-controller's OCI image without a container engine (`make image`):
// a static, non-root base assembled here (/etc/passwd and /etc/group with nonroot 65532, the
// machine's CA certificates, Go's time zone database) and the controller built for each platform,
// written as a multi-platform OCI image layout whose index is tagged with the release version.
// The layout names the image as containerd's and Docker's exports do: by its tag
// (org.opencontainers.image.ref.name, which skopeo and crane read) and by its full name,
// ghcr.io/nodemaint/nodemaint-controller:<version> (io.containerd.image.name, which `ctr images
// import` names it by; a tag alone it would name import-<date>:<version>).
//
//	go run ./hack/image -version v0.2.0 -commit $(git rev-parse HEAD) -out _output/image
//
// Push it with `crane push --index _output/image REGISTRY/nodemaint-controller:v0.2.0` or
// `skopeo copy --all oci:_output/image:v0.2.0 docker://REGISTRY/nodemaint-controller:v0.2.0`.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user, as distroless's nonroot.
const (
	uid  = 65532
	user = "65532:65532"
	// Entrypoint is where the controller is in the image.
	entrypoint = "/nodemaint-controller"
	// caBundle is where Go's crypto/x509 looks first on Linux.
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
	// repository is the image's name without its tag: the chart's and config/manager's.
	repository = "ghcr.io/nodemaint/nodemaint-controller"
)

func main() {
	var (
		version   = flag.String("version", "v0.0.0-dev", "the release version: the binary's --version and the image's tag")
		commit    = flag.String("commit", "unknown", "the commit the image is built from")
		platforms = flag.String("platforms", "linux/amd64,linux/arm64", "the platforms, comma-separated")
		out       = flag.String("out", "_output/image", "the OCI image layout to write (replaced)")
		caFile    = flag.String("ca-certificates", caBundle, "the CA certificates the image trusts (PEM bundle)")
		created   = flag.String("created", "", "the image's creation time, RFC 3339; default: the commit's time, else now")
	)
	flag.Parse()
	if err := run(*version, *commit, strings.Split(*platforms, ","), *out, *caFile, *created); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(version, commit string, platforms []string, out, caFile, createdFlag string) error {
	created, err := creationTime(createdFlag)
	if err != nil {
		return err
	}
	base, err := baseLayer(caFile, created)
	if err != nil {
		return err
	}
	var archs []string
	bins := map[string][]byte{}
	for _, p := range platforms {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" {
			return fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		if bins[arch], err = build(arch, version, commit); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		archs = append(archs, arch)
	}
	idx, err := index(base, archs, bins, version, commit, created)
	if err != nil {
		return err
	}
	if err := write(out, idx, repository, version); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s:%s (%s) for %s in %s\n", repository, version, digest, strings.Join(platforms, ", "), out)
	return nil
}

// index is the multi-platform image: one image per architecture, of the base and the binary
// built for it.
func index(base v1.Layer, archs []string, bins map[string][]byte, version, commit string, created time.Time) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		img, err := image(base, arch, bins[arch], version, commit, created)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	return idx, nil
}

// write replaces out with an OCI image layout holding idx, tagged, and named repo:tag.
func write(out string, idx v1.ImageIndex, repo, tag string) error {
	if err := removeAll(out); err != nil {
		return err
	}
	lp, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          repo + ":" + tag,
	}))
}

// image is the controller's image for linux/arch: the base layer and the layer of bin, the
// controller built for arch.
func image(base v1.Layer, arch string, bin []byte, version, commit string, created time.Time) (v1.Image, error) {
	binLayer, err := layer([]entry{{name: entrypoint, mode: 0o755, data: bin}}, created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "nodemaint-controller",
		"org.opencontainers.image.description": "Declarative node maintenance for Kubernetes",
		"org.opencontainers.image.source":      "https://github.com/nodemaint/nodemaint",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    commit,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS: "linux", Architecture: arch, Created: v1.Time{Time: created},
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{entrypoint},
			WorkingDir: "/",
			Env:        []string{"SSL_CERT_FILE=" + caBundle},
			Labels:     labels,
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.AppendLayers(img, base, binLayer)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// build builds nodemaint-controller for linux/arch, static and stripped, and returns it.
func build(arch, version, commit string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "nodemaint-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "nodemaint-controller")
	ldflags := "-s -w -buildid= -X github.com/nodemaint/nodemaint/internal/version.version=" + version +
		" -X github.com/nodemaint/nodemaint/internal/version.commit=" + commit
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/nodemaint-controller")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "build nodemaint-controller %s linux/%s\n", version, arch)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build: %w", err)
	}
	return os.ReadFile(out)
}

// baseLayer is the static base: the users, name service switch, CA certificates, time zones and
// the directories a program expects.
func baseLayer(caFile string, created time.Time) (v1.Layer, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (on Debian and Ubuntu: apt-get install ca-certificates)", err)
	}
	entries := []entry{
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: caBundle, mode: 0o644, data: ca},
		{name: "/tmp", dir: true, mode: 0o1777},
		{name: "/home/nonroot", dir: true, mode: 0o700, owner: uid},
	}
	zones, err := zoneinfo()
	if err != nil {
		return nil, err
	}
	return layer(append(entries, zones...), created)
}

// zoneinfo is Go's time zone database ($GOROOT/lib/time/zoneinfo.zip) as /usr/share/zoneinfo,
// where Go's time package and others look.
func zoneinfo() ([]entry, error) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return nil, fmt.Errorf("time zone database: %w", err)
	}
	defer zr.Close()
	var out []entry
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, entry{name: path.Join("/usr/share/zoneinfo", f.Name), mode: 0o644, data: data})
	}
	return out, nil
}

// entry is one file or directory of a layer.
type entry struct {
	name  string
	dir   bool
	mode  int64
	owner int
	data  []byte
}

// layer is a gzipped tar layer of the entries and their parent directories, in name order, every
// time the creation time: the same input gives the same digest.
func layer(entries []entry, created time.Time) (v1.Layer, error) {
	all := map[string]entry{}
	for _, e := range entries {
		all[e.name] = e
		for d := path.Dir(e.name); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{name: d, dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// creationTime is the flag's time, else the commit's, else now.
func creationTime(flagValue string) (time.Time, error) {
	if flagValue != "" {
		return time.Parse(time.RFC3339, flagValue)
	}
	if out, err := exec.Command("git", "log", "-1", "--format=%cI").Output(); err == nil {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out))); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Now().UTC().Truncate(time.Second), nil
}

// removeAll removes the previous layout, refusing a path that is not one.
func removeAll(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 {
			return fmt.Errorf("%s exists and is not an OCI image layout: not replacing it", dir)
		}
	}
	return os.RemoveAll(dir)
}
