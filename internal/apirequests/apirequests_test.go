package apirequests

import (
	"net/url"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url                 string
		verb, resource, subresource string
	}{
		{"GET", "/api/v1/pods?limit=500", "list", "pods", ""},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=1", "watch", "pods", ""},
		{"GET", "/api/v1/namespaces/a/pods/p", "get", "pods", ""},
		{"PATCH", "/api/v1/namespaces/a/pods/p/status", "patch", "pods", "status"},
		{"POST", "/api/v1/namespaces/a/pods/p/eviction", "create", "pods", "eviction"},
		{"DELETE", "/api/v1/namespaces/a/pods/p", "delete", "pods", ""},
		{"PATCH", "/api/v1/nodes/n", "patch", "nodes", ""},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/x/leases/l", "update", "leases.coordination.k8s.io", ""},
		{"PATCH", "/apis/apps/v1/namespaces/a/deployments/d", "patch", "deployments.apps", ""},
		{"PATCH", "/apis/nodemaint.dev/v1alpha1/nodemaintenances/m/status", "patch", "nodemaintenances.nodemaint.dev", "status"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/a/events", "create", "events.events.k8s.io", ""},
		{"GET", "/api/v1/namespaces", "list", "namespaces", ""},
		{"GET", "/api/v1/namespaces/kube-system", "get", "namespaces", ""},
		{"DELETE", "/api/v1/namespaces/a/pods", "deletecollection", "pods", ""},
		{"GET", "/apis", "get", "nonresource", ""},
		{"GET", "/api/v1", "get", "discovery", ""},
		{"GET", "/version", "get", "nonresource", ""},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		verb, resource, sub := Classify(tc.method, u)
		if verb != tc.verb || resource != tc.resource || sub != tc.subresource {
			t.Errorf("%s %s: got %q %q %q, want %q %q %q", tc.method, tc.url, verb, resource, sub, tc.verb, tc.resource, tc.subresource)
		}
	}
}
