// Command crd-bounds adds size limits, enums and validation rules to the core types embedded in
// nodemaint's CRDs (the NodeMaintenance's v1.NodeSelector and metav1.LabelSelector podSelector,
// the DrainRule's metav1.LabelSelectors), which carry no kubebuilder markers of their own. With
// the limits, the API server can afford the CEL rules that validate the selectors at admission
// time. `make generate` runs it after controller-gen, on each CRD file.
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
	maxLabelValue   = 63
)

// Limits of a label selector (a DrainRule's, a NodeMaintenance's podSelector). Lower than a node
// selector's: a DrainRule has up to 96 of them, and the API server's CEL cost budget must cover a
// rule on every value of every one.
const (
	maxMatchLabels       = 32
	maxLabelRequirements = 16
	maxLabelValues       = 32
)

// labelSelectorOperators are the label selector operators (metav1.LabelSelectorOperator).
var labelSelectorOperators = enum("In", "NotIn", "Exists", "DoesNotExist")

// Rules of a label selector: what metav1.LabelSelectorAsSelector refuses, refused at admission.
var (
	keyRule = apiextensionsv1.ValidationRule{
		Rule:    "!format.qualifiedName().validate(self).hasValue()",
		Message: "must be a valid label key: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
	}
	valueRule = apiextensionsv1.ValidationRule{
		Rule:    "self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",
		Message: "must be a valid label value: empty, or at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
	}
	matchLabelsRule = apiextensionsv1.ValidationRule{
		Rule:    "self.all(k, !format.qualifiedName().validate(k).hasValue())",
		Message: "every key must be a valid label key: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
	}
	valuesRule = apiextensionsv1.ValidationRule{
		Rule:    "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",
		Message: "operators In and NotIn need values; Exists and DoesNotExist take none",
	}
)

func enum(values ...string) []apiextensionsv1.JSON {
	var out []apiextensionsv1.JSON
	for _, v := range values {
		out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return out
}

// operators are the node selector operators (v1.NodeSelectorOperator).
var operators = enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-bounds CRD-FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := run(path); err != nil {
			fmt.Fprintln(os.Stderr, "crd-bounds:", path+":", err)
			os.Exit(1)
		}
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
		var err error
		switch crd.Spec.Names.Kind {
		case "NodeMaintenance":
			err = boundNodeMaintenance(&spec)
		case "DrainRule":
			err = boundDrainRule(&spec)
		default:
			err = fmt.Errorf("unknown kind %s", crd.Spec.Names.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// controller-gen writes a document separator first; keep the file's form.
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// boundDrainRule bounds and validates the label selectors of spec.nodes[].selector and
// spec.pods[].{selector,namespaceSelector}.
func boundDrainRule(spec *apiextensionsv1.JSONSchemaProps) error {
	for _, f := range []struct{ list, field string }{{"nodes", "selector"}, {"pods", "selector"}, {"pods", "namespaceSelector"}} {
		list, ok := spec.Properties[f.list]
		if !ok || list.Items == nil || list.Items.Schema == nil {
			return fmt.Errorf("no spec.%s[]", f.list)
		}
		sel, ok := list.Items.Schema.Properties[f.field]
		if !ok {
			return fmt.Errorf("no spec.%s[].%s", f.list, f.field)
		}
		if err := boundLabelSelector(&sel); err != nil {
			return fmt.Errorf("spec.%s[].%s: %w", f.list, f.field, err)
		}
		list.Items.Schema.Properties[f.field] = sel
		spec.Properties[f.list] = list
	}
	return nil
}

// boundLabelSelector gives a metav1.LabelSelector's schema the limits and rules of
// metav1.LabelSelectorAsSelector: operators, values by operator, label keys and values.
func boundLabelSelector(sel *apiextensionsv1.JSONSchemaProps) error {
	ml, ok := sel.Properties["matchLabels"]
	if !ok || ml.AdditionalProperties == nil || ml.AdditionalProperties.Schema == nil {
		return fmt.Errorf("no matchLabels")
	}
	ml.MaxProperties = ptr.To[int64](maxMatchLabels)
	ml.XValidations = append(ml.XValidations, matchLabelsRule)
	mlValue := ml.AdditionalProperties.Schema
	mlValue.MaxLength = ptr.To[int64](maxLabelValue)
	mlValue.XValidations = append(mlValue.XValidations, valueRule)
	sel.Properties["matchLabels"] = ml

	exprs, ok := sel.Properties["matchExpressions"]
	if !ok || exprs.Items == nil || exprs.Items.Schema == nil {
		return fmt.Errorf("no matchExpressions")
	}
	exprs.MaxItems = ptr.To[int64](maxLabelRequirements)
	req := exprs.Items.Schema
	key := req.Properties["key"]
	key.MaxLength = ptr.To[int64](maxStringLength)
	key.XValidations = append(key.XValidations, keyRule)
	req.Properties["key"] = key
	op := req.Properties["operator"]
	op.Enum = labelSelectorOperators
	req.Properties["operator"] = op
	values := req.Properties["values"]
	values.MaxItems = ptr.To[int64](maxLabelValues)
	values.Items.Schema.MaxLength = ptr.To[int64](maxLabelValue)
	values.Items.Schema.XValidations = append(values.Items.Schema.XValidations, valueRule)
	req.Properties["values"] = values
	req.XValidations = append(req.XValidations, valuesRule)
	sel.Properties["matchExpressions"] = exprs
	return nil
}

// boundNodeMaintenance bounds spec.nodeSelector, and bounds and validates spec.podSelector.
func boundNodeMaintenance(spec *apiextensionsv1.JSONSchemaProps) error {
	if err := boundNodeSelector(spec); err != nil {
		return err
	}
	sel, ok := spec.Properties["podSelector"]
	if !ok {
		return fmt.Errorf("no spec.podSelector")
	}
	if err := boundLabelSelector(&sel); err != nil {
		return fmt.Errorf("spec.podSelector: %w", err)
	}
	spec.Properties["podSelector"] = sel
	return nil
}

// boundNodeSelector bounds spec.nodeSelector, a v1.NodeSelector.
func boundNodeSelector(spec *apiextensionsv1.JSONSchemaProps) error {
	sel, ok := spec.Properties["nodeSelector"]
	if !ok {
		return fmt.Errorf("no spec.nodeSelector")
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
	return nil
}
