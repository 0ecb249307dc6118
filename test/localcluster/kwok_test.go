package localcluster

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestSkipHeldNodes(t *testing.T) {
	stage := []byte(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
`)
	got, err := skipHeldNodes(stage)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Spec struct {
			Selector struct {
				MatchExpressions []struct {
					Key      string   `json:"key"`
					Operator string   `json:"operator"`
					Values   []string `json:"values"`
				} `json:"matchExpressions"`
			} `json:"selector"`
			Next struct {
				StatusTemplate string `json:"statusTemplate"`
			} `json:"next"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	exprs := s.Spec.Selector.MatchExpressions
	if len(exprs) != 2 || exprs[0].Key != ".status.phase" || len(exprs[0].Values) != 1 {
		t.Fatalf("selector %+v, want the stage's own expression kept and one more", exprs)
	}
	if want := `.metadata.annotations["` + NodeStatusHeldAnnotation + `"]`; exprs[1].Key != want || exprs[1].Operator != "DoesNotExist" {
		t.Errorf("added expression %+v, want %s DoesNotExist", exprs[1], want)
	}
	if !strings.Contains(s.Spec.Next.StatusTemplate, "{{ $now := Now }}\nphase: Running") {
		t.Errorf("status template changed: %q", s.Spec.Next.StatusTemplate)
	}

	if _, err := skipHeldNodes([]byte("kind: Stage\nspec: {}\n")); err == nil {
		t.Error("a stage without a selector: no error")
	}
}

// TestNodeStatusHeldStage: the Stage that holds a node's status selects the annotation
// HoldNodeStatus sets.
func TestNodeStatusHeldStage(t *testing.T) {
	want := `'.metadata.annotations["` + NodeStatusHeldAnnotation + `"]'`
	if !strings.Contains(string(nodeStages), "- key: "+want+"\n      operator: 'Exists'") {
		t.Errorf("kwok_node_stages.yaml does not select %s Exists:\n%s", want, nodeStages)
	}
}
