// Command crd-bounds adds size limits and enums to the core types embedded in nodemaint's CRDs (the
// NodeMaintenance's v1.NodeSelector), which carry no kubebuilder markers of their own. With the
// limits, the API server can afford the CEL rules that validate the selector at admission time.
// `make generate` runs it after controller-gen.
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Limits of a node selector, as generous as any real selector needs.
const (
	maxTerms        = 16
	maxRequirements = 32
	maxValues       = 256
	maxStringLength = 316 // a qualified label key: 253 prefix + "/" + 63 name, rounded up
)

// operators are the node selector operators (v1.NodeSelectorOperator).
var operators = func() []apiextensionsv1.JSON {
	var out []apiextensionsv1.JSON
	for _, op := range []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"} {
		out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + op + `"`)})
	}
	return out
}()

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-bounds config/crd/bases/nodemaint.dev_nodemaintenances.yaml")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crd-bounds:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return fmt.Errorf("%s: no spec", v.Name)
		}
		sel, ok := spec.Properties["nodeSelector"]
		if !ok {
			return fmt.Errorf("%s: no spec.nodeSelector", v.Name)
		}
		terms := sel.Properties["nodeSelectorTerms"]
		terms.MaxItems = ptr.To[int64](maxTerms)
		term := terms.Items.Schema
		for _, field := range []string{"matchExpressions", "matchFields"} {
			reqs := term.Properties[field]
			reqs.MaxItems = ptr.To[int64](maxRequirements)
			req := reqs.Items.Schema
			key := req.Properties["key"]
			key.MaxLength = ptr.To[int64](maxStringLength)
			req.Properties["key"] = key
			op := req.Properties["operator"]
			op.Enum = operators
			req.Properties["operator"] = op
			values := req.Properties["values"]
			values.MaxItems = ptr.To[int64](maxValues)
			values.Items.Schema.MaxLength = ptr.To[int64](maxStringLength)
			req.Properties["values"] = values
			term.Properties[field] = reqs
		}
		sel.Properties["nodeSelectorTerms"] = terms
		spec.Properties["nodeSelector"] = sel
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// controller-gen writes a document separator first; keep the file's form.
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
