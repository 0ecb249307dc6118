package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// The alerts and the dashboard have one source, config/default/prometheus; the chart renders
// copies of it.
var (
	rulesSource     = repoPath("config", "default", "prometheus", "rules.yaml")
	dashboardSource = repoPath("config", "default", "prometheus", "dashboard.json")
)

// TestMonitoringChartMatchesConfig: the chart's copies of the alerts and the dashboard are
// config/default/prometheus's (hack/sync-chart.sh).
func TestMonitoringChartMatchesConfig(t *testing.T) {
	for _, src := range []string{rulesSource, dashboardSource} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(repoPath("charts", "nodemaint", "files", "prometheus", filepath.Base(src)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("the chart's copy of %s differs or is missing (%v): run make generate", src, err)
		}
	}
}

// sourceRules are the rule groups of config/default/prometheus/rules.yaml, as the kustomize
// component renders them.
func sourceRules(t *testing.T) []any {
	t.Helper()
	data, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, string(data))
	rules := kinds(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules in %s, want 1", len(rules), rulesSource)
	}
	groups, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	return groups
}

// TestHelmChartMonitoring renders the chart's PrometheusRule and dashboard ConfigMap: off by
// default; on, the rules of config/ with the release's metrics job and the durations and labels
// of the values, and the dashboard of config/ with the sidecar's label.
func TestHelmChartMonitoring(t *testing.T) {
	objs := parse(t, helmTemplate(t))
	if n := len(kinds(objs, "PrometheusRule")); n != 0 {
		t.Errorf("%d PrometheusRules by default", n)
	}
	if _, ok := objs["ConfigMap/"+namespace+"/"+controller+"-dashboard"]; ok {
		t.Error("a dashboard ConfigMap by default")
	}

	objs = parse(t, helmTemplate(t,
		"--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.labels.release=prometheus",
		"--set", "prometheusRule.additionalLabels.team=platform",
		"--set", "prometheusRule.for.NodemaintDrainBlocked=1h",
		"--set", "grafanaDashboard.enabled=true",
		"--set", "grafanaDashboard.namespace=monitoring",
		"--set", "fullnameOverride=nm",
	))
	rules := kinds(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("PrometheusRules %v, want 1", rules)
	}
	if rules[0].GetNamespace() != namespace {
		t.Errorf("PrometheusRule in %s, want in %s", rules[0].GetNamespace(), namespace)
	}
	if rules[0].GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v, want release=prometheus", rules[0].GetLabels())
	}
	got, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	// What the values change, applied to the source.
	want := sourceRules(t)
	for _, g := range want {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			rule["expr"] = strings.ReplaceAll(rule["expr"].(string), `job="nodemaint-controller-metrics"`, `job="nm-metrics"`)
			rule["labels"].(map[string]any)["team"] = "platform"
			if rule["alert"] == "NodemaintDrainBlocked" {
				rule["for"] = "1h"
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("the chart's rules:\n%s\nwant:\n%s", g, w)
	}

	cm := objs["ConfigMap/monitoring/nm-dashboard"]
	if cm == nil {
		t.Fatalf("no ConfigMap monitoring/nm-dashboard")
	}
	dashboard, err := os.ReadFile(dashboardSource)
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1", cm.GetLabels())
	}
	if data["nodemaint.json"] != strings.TrimSuffix(string(dashboard), "\n") {
		t.Errorf("dashboard ConfigMap data differs from %s", dashboardSource)
	}
}

// TestKustomizeMonitoring renders config/default with the prometheus component: the
// PrometheusRule of rules.yaml and the dashboard ConfigMap for the Grafana sidecar.
func TestKustomizeMonitoring(t *testing.T) {
	overlay := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(overlay, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kustomization := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", rel(repoPath("config", "default")), rel(repoPath("config", "default", "prometheus")))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := framework.Kubectl(t, "kustomize", overlay)
	if err != nil {
		t.Fatalf("kubectl kustomize with the prometheus component: %v\n%s", err, out)
	}
	objs := parse(t, out)
	rules := kinds(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("the prometheus component gives %d PrometheusRules, want 1", len(rules))
	}
	if rules[0].GetNamespace() != namespace {
		t.Errorf("the prometheus component's PrometheusRule in %s, want in %s", rules[0].GetNamespace(), namespace)
	}
	if got, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups"); !reflect.DeepEqual(got, sourceRules(t)) {
		t.Errorf("the component's rules differ from %s", rulesSource)
	}
	cm := objs["ConfigMap/"+namespace+"/nodemaint-dashboard"]
	dashboard, err := os.ReadFile(dashboardSource)
	if err != nil {
		t.Fatal(err)
	}
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1", cm.GetLabels())
	}
	if data["nodemaint.json"] != string(dashboard) {
		t.Errorf("dashboard ConfigMap data differs from %s", dashboardSource)
	}
}

// TestAlertRunbooks: every alert's runbook_url points at a heading of docs/user-guide.md, as the
// repository's web view anchors it.
func TestAlertRunbooks(t *testing.T) {
	const prefix = "https://github.com/nodemaint/nodemaint/blob/main/docs/user-guide.md#"
	guide, err := os.ReadFile(repoPath("docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(guide), "\n") {
		if heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			anchors[headingAnchor(heading)] = true
		}
	}
	alerts := 0
	for _, g := range sourceRules(t) {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			if name == "" {
				continue
			}
			alerts++
			url, _, _ := unstructured.NestedString(rule, "annotations", "runbook_url")
			anchor, ok := strings.CutPrefix(url, prefix)
			if !ok || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not a heading of docs/user-guide.md (%s...)", name, url, prefix)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts in the rules")
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
