package install

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// grant is one verb on one resource (or non-resource URL) of an API group, in a role.
type permit struct{ role, group, resource, verb string }

func (g permit) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s: %s %s (%s)", g.role, g.verb, g.resource, group)
}

// chartRoleNames maps the chart's names of roles to config/'s, where they differ (the table
// names config/'s).
var chartRoleNames = map[string]string{
	controller + "-cluster-api":             "nodemaint-cluster-api",
	controller + "-cluster-api-kubeconfigs": "nodemaint-cluster-api-kubeconfigs",
}

// TestRBACJustified renders every Role and ClusterRole the installs can create (kustomize
// config/default with its opt-in components, and the Helm chart with its opt-in values) and fails
// on any verb that no row of the RBAC table of docs/user-guide.md ("The controller's own rights")
// justifies, and on a row that no install grants (the table describes what is installed).
func TestRBACJustified(t *testing.T) {
	justified := rbacTable(t)

	overlay := t.TempDir()
	var components []string
	for _, c := range []string{"pod-deletion", "cluster-api", filepath.Join("default", "prometheus")} {
		components = append(components, "- "+relTo(t, overlay, repoPath("config", c)))
	}
	kustomization := fmt.Sprintf("resources:\n- %s\ncomponents:\n%s\n", relTo(t, overlay, repoPath("config", "default")), strings.Join(components, "\n"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	renders := map[string]string{
		"kustomize config/default":                   renderKustomize(t, repoPath("config", "default")),
		"kustomize config/default + every component": renderKustomize(t, overlay),
		"helm template":                              helmTemplate(t),
		"helm template, every opt-in": helmTemplate(t, "--set", "podDeletion.enabled=true", "--set", "clusterAPI.enabled=true",
			"--set", "serviceMonitor.enabled=true", "--set", "metrics.certManager.enabled=true", "--set", "admissionPolicies.nodeScope.enabled=true",
			"--set", "metricsReaderServiceAccounts[0].name=prometheus-k8s", "--set", "metricsReaderServiceAccounts[0].namespace=monitoring"),
	}
	granted := map[permit]bool{}
	for name, out := range renders {
		t.Run(name, func(t *testing.T) {
			objs := parse(t, out)
			roles := 0
			for _, kind := range []string{"ClusterRole", "Role"} {
				for _, obj := range kinds(objs, kind) {
					roles++
					var role rbacv1.ClusterRole // a Role's fields are the same
					decode(t, obj, &role)
					if role.AggregationRule != nil {
						t.Errorf("%s %s aggregates other roles: the table cannot justify what it grants", kind, role.Name)
					}
					name := role.Name
					if n, ok := chartRoleNames[name]; ok && strings.HasPrefix(name, controller) {
						name = n
					}
					for _, g := range expand(name, role.Rules) {
						granted[g] = true
						if !justified[g] {
							t.Errorf("%s %s grants %s, which no row of the RBAC table in docs/user-guide.md justifies", kind, role.Name, g)
						}
					}
				}
			}
			if roles == 0 {
				t.Fatal("no roles rendered")
			}
		})
	}
	for g := range justified {
		if !granted[g] {
			t.Errorf("the RBAC table in docs/user-guide.md justifies %s, which no install grants: remove the row", g)
		}
	}
}

// TestRBACJustifiedFailsOnAnUnlistedVerb: the check fails on the default ClusterRole as it was
// before pods delete became an opt-in.
func TestRBACJustifiedFailsOnAnUnlistedVerb(t *testing.T) {
	justified := rbacTable(t)
	before := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete", "get", "list", "patch", "watch"}}}
	var unjustified []string
	for _, g := range expand(controller, before) {
		if !justified[g] {
			unjustified = append(unjustified, g.String())
		}
	}
	if !slices.Equal(unjustified, []string{controller + ": delete pods (core)"}) {
		t.Errorf("unjustified %q; want only pods delete", unjustified)
	}
}

// expand lists every verb of every resource of every group a role's rules grant.
func expand(role string, rules []rbacv1.PolicyRule) []permit {
	var out []permit
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				out = append(out, permit{role, "", url, verb})
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, permit{role, group, res, verb})
				}
			}
		}
	}
	return out
}

var backticked = regexp.MustCompile("`([^`]*)`")

// rbacTable reads the RBAC table of docs/user-guide.md, the one after the comment
// "<!-- rbac-table", into the grants it justifies. A row is: role (backticked, then notes), API
// groups ("core", backticked names, or "non-resource URL"), resources (backticked), verbs
// (comma-separated), what for.
func rbacTable(t *testing.T) map[permit]bool {
	t.Helper()
	b, err := os.ReadFile(repoPath("docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "<!-- rbac-table")
	if i < 0 {
		t.Fatal("docs/user-guide.md has no <!-- rbac-table --> marker before its RBAC table")
	}
	lines := strings.Split(doc[i:], "\n")[1:]
	out := map[permit]bool{}
	rows := 0
	for n, line := range lines {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if n < 2 { // the header and its separator
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Fatalf("RBAC table row %q: %d cells, want 5", line, len(cells))
		}
		role := backticked.FindStringSubmatch(cells[0])
		if role == nil {
			t.Fatalf("RBAC table row %q: no role", line)
		}
		var groups []string
		for _, g := range strings.Split(cells[1], ",") {
			switch g = strings.TrimSpace(g); {
			case g == "core", g == "non-resource URL":
				groups = append(groups, "")
			case backticked.MatchString(g):
				groups = append(groups, backticked.FindStringSubmatch(g)[1])
			default:
				t.Fatalf("RBAC table row %q: API group %q", line, g)
			}
		}
		var resources []string
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			resources = append(resources, m[1])
		}
		verbs := strings.Split(cells[3], ",")
		if len(resources) == 0 {
			t.Fatalf("RBAC table row %q: no resources", line)
		}
		if strings.TrimSpace(cells[4]) == "" {
			t.Fatalf("RBAC table row %q: no reason", line)
		}
		for _, g := range groups {
			for _, r := range resources {
				for _, v := range verbs {
					out[permit{role[1], g, r, strings.TrimSpace(v)}] = true
				}
			}
		}
		rows++
	}
	if rows == 0 {
		t.Fatal("the RBAC table of docs/user-guide.md has no rows")
	}
	return out
}
