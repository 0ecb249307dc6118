// Package manifests installs nodemaint's CRDs and RBAC from the repository's config/ into a
// cluster, for the end-to-end tests (test/e2e/framework) and the benchmark (test/bench).
package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Dirs are the directories of the repository Install applies, in order: the controller runs with
// exactly the permissions the install gives it, and under the admission policy that keeps its
// writes to other controllers' objects to the fields nodemaint owns.
var Dirs = []string{"config/crd/bases", "config/rbac", "config/admission/controller-writes"}

// Install creates namespace (where nodemaint-controller runs), applies the manifests of Dirs under
// the repository root with server-side apply as fieldOwner, and waits until the CRDs are
// established. c's scheme must know CustomResourceDefinitions.
func Install(ctx context.Context, c client.Client, root, namespace, fieldOwner string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return Apply(ctx, c, root, fieldOwner, Dirs...)
}

// Apply applies the manifests of the directories under the repository root with server-side
// apply as fieldOwner, and waits until the CRDs among them are established.
func Apply(ctx context.Context, c client.Client, root, fieldOwner string, dirs ...string) error {
	var crds []string
	for _, dir := range dirs {
		objs, err := Read(filepath.Join(root, dir))
		if err != nil {
			return err
		}
		for _, obj := range objs {
			err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership)
			if err != nil {
				return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj.GetName())
			}
		}
	}
	for _, name := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established {
					return cond.Status == apiextensionsv1.ConditionTrue, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	return nil
}

// Read returns the objects of the YAML files in dir, kustomization.yaml aside.
func Read(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		decoded, err := Decode(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// Decode returns the objects of a stream of YAML or JSON documents, empty documents aside.
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	decoder := yaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
