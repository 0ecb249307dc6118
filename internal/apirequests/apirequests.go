// Package apirequests counts the controller's own requests to the API server by client, verb,
// resource and subresource (nodemaint_api_requests_total). client-go's rest_client_requests_total
// says only the HTTP method; what a maintenance costs the API server, and which write to fold
// next, needs the resource: a pod's status patch (the evacuation request, the answer), its
// metadata patch (the deletion cost), an eviction, an Event.
package apirequests

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_api_requests_total",
	Help: "Requests of nodemaint-controller to the API server, by client (the part of the controller that sent it), verb (get, list, watch, create, update, patch, delete, deletecollection), resource and subresource.",
}, []string{"client", "verb", "resource", "subresource"})

func init() { metrics.Registry.MustRegister(requests) }

// Wrap returns a transport wrapper (for rest.Config.WrapTransport) that counts every request
// as sent by client.
func Wrap(client string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			verb, resource, subresource := Classify(req.Method, req.URL)
			requests.WithLabelValues(client, verb, resource, subresource).Inc()
			return rt.RoundTrip(req)
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Classify names a request to the API server as the API server's own request metrics do: its
// verb, resource (with its group, "deployments.apps"; the core group bare) and subresource.
// Paths outside /api and /apis are "nonresource" with the verb the HTTP method's.
func Classify(method string, u *url.URL) (verb, resource, subresource string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return strings.ToLower(method), "nonresource", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaced: namespaces/<ns>/<resource>/...
	}
	if len(parts) == 0 {
		return strings.ToLower(method), "discovery", ""
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	named := len(parts) >= 2
	if len(parts) >= 3 {
		subresource = parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource, subresource
}
