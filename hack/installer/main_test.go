package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestBuild: install.yaml is config/default, every object of it, with the controller's image
// tagged with the release version.
func TestBuild(t *testing.T) {
	out, err := build("../../config/default", "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var images []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, obj.Kind+"/"+obj.Metadata.Name)
		if obj.Kind == "Deployment" {
			var d appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatal(err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				images = append(images, c.Image)
			}
		}
	}
	if len(images) != 1 || images[0] != image+":v9.9.9" {
		t.Errorf("images %q, want %s:v9.9.9", images, image)
	}
	for _, want := range []string{"CustomResourceDefinition/nodemaintenances.nodemaint.dev", "CustomResourceDefinition/drainrules.nodemaint.dev",
		"Namespace/nodemaint-system", "ClusterRole/nodemaint-controller", "ValidatingAdmissionPolicy/nodemaint-drain-timeout-delete"} {
		if !strings.Contains(strings.Join(kinds, " "), want) {
			t.Errorf("install.yaml has %v, not %s", kinds, want)
		}
	}
}
