package localcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images of the real node, built here (no registry is reachable) and imported into its
// containerd. Both hold one static binary, test/localcluster/workload. Their tags are not
// :latest, so the kubelet's default pull policy (IfNotPresent) never pulls them.
const (
	// PauseImage is the pod sandbox's image (containerd's pinned sandbox image).
	PauseImage = "nodemaint.dev/pause:v1"
	// WorkloadImage serves readiness on :8080 and handles SIGTERM (see the workload command).
	WorkloadImage = "nodemaint.dev/workload:v1"

	workloadPackage = "./test/localcluster/workload"
	workloadPath    = "/workload"
)

// writeNodeImages builds the workload binary from the repository at repoRoot and writes the
// pause and workload images into one image tarball at out, for `ctr images import`.
func writeNodeImages(ctx context.Context, repoRoot, out string) error {
	bin := filepath.Join(filepath.Dir(out), "workload")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, workloadPackage)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", workloadPackage, err, b)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	layer, err := binaryLayer(data)
	if err != nil {
		return err
	}
	images := map[name.Reference]v1.Image{}
	for ref, args := range map[string][]string{PauseImage: {workloadPath, "pause"}, WorkloadImage: {workloadPath, "serve"}} {
		img, err := mutate.AppendLayers(empty.Image, layer)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", runtime.GOARCH
		cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
		cf.Config.Entrypoint = args
		cf.Config.Env = []string{"PATH=/"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		images[tag] = img
	}
	return tarball.MultiRefWriteToFile(out, images)
}

// binaryLayer is a layer of the workload binary at workloadPath, with /tmp and /data (an
// emptyDir's mount point) present.
func binaryLayer(bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"tmp/", "data/", "dev/", "proc/", "sys/", "etc/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o1777, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: workloadPath[1:], Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}
