package main

import (
	"context"
	"regexp"
	"sort"
	"strconv"

	"github.com/fluxcd/pkg/envsubst"
	generator "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"
)

const disabledKey = "kustomize.toolkit.fluxcd.io/substitute"

// What envsubst v1.7.1 says when strict substitution meets a variable with no value (template.go).
var unsetVariable = regexp.MustCompile(`variable not set \(strict mode\): ("(?:[^"\\]|\\.)*")`)

type substituted struct {
	Object map[string]any `json:"object,omitempty"` // absent: unchanged
	Unset  []string       `json:"unset,omitempty"`  // strict substitution fails on these (left as written)
	Left   []string       `json:"left,omitempty"`   // only the cluster has their values (left as written)
	Error  string         `json:"error,omitempty"`  // what else fails the Kustomization on this object
	Field  []any          `json:"field,omitempty"`  // where in the object envsubst cannot parse
}

// substitute runs a Flux Kustomization's post-build substitution over the objects its build gave, as
// kustomize-controller v1.9.5 does in build(): fluxcd/pkg/kustomize SubstituteVariables on each object,
// strict (the StrictPostBuildSubstitutions feature, on by default since v1.9), with substituteStrategy
// Always when the spec says so. Sources are read from `sources` (sourceReader).
//
// Two things the controller never meets, because it has the cluster: a source only the cluster holds (the
// cluster-settings ConfigMap, a Secret made by another tool) and a variable with no value. Their references
// are left as written (each is given its own `${NAME}` as value), and reported, so the tool can say so instead
// of failing at the first one as the controller would.
func substitute(req request) response {
	kustomization := unstructured.Unstructured{Object: req.Kustomization}
	always := false
	if strategy, _, _ := unstructured.NestedString(req.Kustomization, "spec", "postBuild", "substituteStrategy"); strategy == "Always" {
		always = true
	}
	reader := newSourceReader(req.Sources)
	unknown := map[string]bool{}
	for _, name := range req.Unknown {
		unknown[name] = true
	}
	known, err := generator.LoadVariables(context.Background(), reader, kustomization)
	if err != nil {
		return response{Error: err.Error()}
	}
	inline, _, _ := unstructured.NestedStringMap(req.Kustomization, "spec", "postBuild", "substitute")
	for name, value := range inline {
		known[name] = value
	}
	factory := provider.NewDefaultDepProvider().GetResourceFactory()
	results := make([]substituted, 0, len(req.Objects))
	for _, object := range req.Objects {
		res, err := factory.FromMap(object)
		if err != nil {
			results = append(results, substituted{Error: err.Error()})
			continue
		}
		results = append(results, substituteOne(kustomization, reader, res, known, unknown, req.AnyUnknown, always))
	}
	return response{Objects: results}
}

func substituteOne(kustomization unstructured.Unstructured, reader sourceReader, res *resource.Resource,
	known map[string]string, unknown map[string]bool, anyUnknown, always bool) substituted {
	if res.GetLabels()[disabledKey] == generator.DisabledValue || res.GetAnnotations()[disabledKey] == generator.DisabledValue {
		return substituted{} // SubstituteVariables leaves it alone
	}
	text, err := res.AsYAML()
	if err != nil {
		return substituted{Error: err.Error()}
	}
	referenced, err := references(string(text))
	if err != nil {
		return substituted{Error: err.Error(), Field: unparsable(res.Map())}
	}
	var result substituted
	asWritten := map[string]string{}
	for _, name := range referenced {
		if _, ok := known[name]; !ok && (unknown[name] || anyUnknown) {
			asWritten[name] = "${" + name + "}"
			result.Left = append(result.Left, name)
		}
	}
	for range len(referenced) + 1 {
		out, err := generator.SubstituteVariables(context.Background(), reader, withInline(kustomization, asWritten),
			res.DeepCopy(), generator.SubstituteWithStrict(true), generator.SubstituteWithAlways(always))
		if err != nil {
			match := unsetVariable.FindStringSubmatch(err.Error())
			name, unquoteErr := "", error(nil)
			if match != nil {
				name, unquoteErr = strconv.Unquote(match[1])
			}
			if match == nil || unquoteErr != nil || asWritten[name] != "" {
				result.Error = err.Error()
				return result
			}
			asWritten[name] = "${" + name + "}"
			result.Unset = append(result.Unset, name)
			continue
		}
		if out != nil {
			object, err := out.Map()
			if err != nil {
				result.Error = err.Error()
				return result
			}
			result.Object = object
		}
		return result
	}
	result.Error = "substitution did not settle"
	return result
}

// references are the names of the variables a text refers to, in order, each once (envsubst's own parser:
// a mapping that knows every name sees them all).
func references(text string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	_, err := envsubst.Eval(text, func(name string) (string, bool) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		return "", true
	})
	return names, err
}

// withInline is the Kustomization with extra spec.postBuild.substitute entries (which win over every source).
func withInline(kustomization unstructured.Unstructured, extra map[string]string) unstructured.Unstructured {
	if len(extra) == 0 {
		return kustomization
	}
	copied := kustomization.DeepCopy()
	inline, _, _ := unstructured.NestedStringMap(copied.Object, "spec", "postBuild", "substitute")
	if inline == nil {
		inline = map[string]string{}
	}
	for name, value := range extra {
		inline[name] = value
	}
	values := map[string]any{}
	for name, value := range inline {
		values[name] = value
	}
	_ = unstructured.SetNestedMap(copied.Object, values, "spec", "postBuild", "substitute")
	return *copied
}

// unparsable is the path of the first string (a value or a key) in an object that envsubst cannot parse.
func unparsable(object map[string]any, _ error) []any {
	var walk func(value any, path []any) []any
	walk = func(value any, path []any) []any {
		switch typed := value.(type) {
		case map[string]any:
			keys := make([]string, 0, len(typed))
			for key := range typed {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			for _, key := range keys {
				here := append(append([]any{}, path...), key)
				if _, err := envsubst.Parse(key); err != nil {
					return here
				}
				if found := walk(typed[key], here); found != nil {
					return found
				}
			}
		case []any:
			for index, item := range typed {
				if found := walk(item, append(append([]any{}, path...), index)); found != nil {
					return found
				}
			}
		case string:
			if _, err := envsubst.Parse(typed); err != nil {
				return path
			}
		}
		return nil
	}
	return walk(object, nil)
}
