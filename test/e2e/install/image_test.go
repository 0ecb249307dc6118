package install

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// The image's user, as make image builds it: distroless's nonroot.
const imageUID = 65532

// TestControllerImage reads back the controller's image that make image wrote for this machine's
// platform ($NODEMAINT_IMAGE, an OCI image layout), checks what a container runtime and a
// cluster admin read of it (the tag, the user, the entrypoint, the labels, the base's files),
// and runs the controller from the image's own filesystem, as the image's user, through a drain.
func TestControllerImage(t *testing.T) {
	dir := os.Getenv("NODEMAINT_IMAGE")
	if dir == "" {
		t.Fatal("NODEMAINT_IMAGE is not set: run the end-to-end tests with make test-e2e, which builds the image (make image) for this machine")
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the image layout %s: %v", dir, err)
	}
	outer, err := idx.IndexManifest()
	if err != nil || len(outer.Manifests) != 1 {
		t.Fatalf("the layout's index: %v, %+v: want one tagged image index", err, outer)
	}
	tag := outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	images, err := idx.ImageIndex(outer.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := images.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	i := -1
	for j, m := range im.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		if m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("the image is for %v, not linux/%s", platforms, runtime.GOARCH)
	}
	img, err := images.Image(im.Manifests[i].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != fmt.Sprintf("%d:%d", imageUID, imageUID) {
		t.Errorf("user %q, want %d:%d", c.User, imageUID, imageUID)
	}
	if !slices.Equal(c.Entrypoint, []string{"/nodemaint-controller"}) {
		t.Errorf("entrypoint %q, want /nodemaint-controller", c.Entrypoint)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  tag,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/nodemaint/nodemaint",
		"org.opencontainers.image.title":    "nodemaint-controller",
	} {
		if c.Labels[k] != want || want == "" {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}

	root := t.TempDir()
	extract(t, mutate.Extract(img), root)
	for file, want := range map[string]string{
		"etc/passwd":                         fmt.Sprintf("nonroot:x:%d:%d:", imageUID, imageUID),
		"etc/ssl/certs/ca-certificates.crt":  "-----BEGIN CERTIFICATE-----",
		"usr/share/zoneinfo/Europe/Berlin":   "TZif",
		"usr/share/zoneinfo/America/Chicago": "TZif",
	} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("/%s in the image: %v, want it to hold %q", file, err, want)
		}
	}
	out, err := exec.Command(filepath.Join(root, c.Entrypoint[0]), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "nodemaint-controller "+tag+" ") {
		t.Errorf("the image's controller --version: %v: %s, want version %s", err, out, tag)
	}

	ctrl := framework.NewControllerInImage(t, root, c.Entrypoint[0], imageUID, imageUID, c.Env)
	ctrl.Start()
	if os.Getuid() == 0 {
		// It runs in the image's filesystem, as the image's user.
		pid := ctrl.Pid()
		inRoot, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || inRoot != root || !strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t", imageUID)) {
			t.Errorf("the controller runs in %q (%v), want %s, as uid %d:\n%s", inRoot, err, root, imageUID, status)
		}
	}
	drainOneNode(t)
}

// drainOneNode drains the node of a Deployment's pod with a NodeMaintenance and waits until the
// maintenance says the node is drained, with the Deployment available again.
func drainOneNode(t *testing.T) {
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 2)
	framework.CreateDeployment(t, d)
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns)); err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s: %v", d.Name, err)
	}
	node := pods.Items[0].Spec.NodeName
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "image e2e",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
	testutil.Eventually(t, 2*time.Minute, nm.Name+" drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), nm.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			t.Errorf("pod %s still on the drained node %s", p.Name, node)
		}
	}
	framework.WaitDeploymentAvailable(t, ns, d.Name)
}

// extract writes a flattened image filesystem (mutate.Extract) into root, with its modes and,
// when this process may, its owners.
func extract(t *testing.T, rc io.ReadCloser, root string) {
	t.Helper()
	defer rc.Close()
	// The image's "/": its user must be able to enter it.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				err = errors.Join(err, f.Close())
			}
		default:
			t.Fatalf("%s in the image: type %c, want files and directories only", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Chmod(path, h.FileInfo().Mode())
		}
		if err == nil && os.Getuid() == 0 {
			err = os.Lchown(path, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatalf("extracting %s: %v", h.Name, err)
		}
	}
}
