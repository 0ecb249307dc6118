package clioptions

import (
	"encoding/json"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// NewDataPrintFlags are -o's flags for what is no API object (a report, a version): json,
// yaml, jsonpath and go-template, through cli-runtime's printers; "" is the command's own text.
func NewDataPrintFlags() *genericclioptions.PrintFlags {
	f := genericclioptions.NewPrintFlags("")
	f.NamePrintFlags = nil // names no object
	f.TypeSetterPrinter = nil
	return f
}

// CheckOutput refuses an -o that the flags have no printer for, before anything is read or
// written; "" (the command's own text) passes.
func CheckOutput(f *genericclioptions.PrintFlags) error {
	if *f.OutputFormat == "" && (f.TemplatePrinterFlags == nil || f.TemplatePrinterFlags.TemplateArgument == nil || *f.TemplatePrinterFlags.TemplateArgument == "") {
		return nil
	}
	_, err := f.ToPrinter()
	return err
}

// PrintData prints v, marshalled to JSON, with the printer of the flags.
func PrintData(f *genericclioptions.PrintFlags, v any, w io.Writer) error {
	p, err := f.ToPrinter()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, w)
}
