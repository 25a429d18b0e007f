package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// The "cel" op: each object against the x-kubernetes-validations (CEL) rules of its CRD, as the API server
// of k8s.io/apiextensions-apiserver v0.36.4 (the version of this module's other k8s.io modules) checks a
// custom resource on create:
//
//   - pkg/apiserver/customresource_handler.go: per served version, NewStructural of the version's schema, then
//     PruneDefaults; the request body is decoded by schemaCoercingDecoder (unknown fields pruned, then the
//     nulls of fields that are not nullable) and defaulted after it (the versioning codec of
//     k8s.io/apimachinery runs the defaulter once the decoder returns);
//   - pkg/registry/customresource/strategy.go, Validate: the OpenAPI schema (validator.go), embedded
//     resources (schema/objectmeta), list-type invariants (schema/listtype), then, unless one of those errors
//     blocks it (hasBlockingErr: Required, NotSupported, TooLong, TooMany, TypeInvalid), the CEL validator
//     that NewStrategy builds with cel.NewValidator(s, true, celconfig.PerCallLimit), run with
//     celconfig.RuntimeCELCostBudget (k8s.io/apiserver v0.36.4, pkg/apis/cel/config.go: 1,000,000 per
//     expression, 10,000,000 per object).
//
// Transition rules (those that read oldSelf) are skipped, as on create: there is no old object
// (schema/cel/validation.go skips them when oldObj is nil, unless the rule sets optionalOldSelf, which the
// CRDValidationRatcheting gate, GA and locked on since 1.33, evaluates with oldSelf empty, as here).
// Left out of the blocking check: metadata's own validation (ValidateObjectMetaAccessor), since a rendered
// object often has its namespace only once Flux applies it.
//
// Only the CEL errors are answered: the schema's own errors are the tool's schema stage's. An answer never
// carries a value of the object: the field.Error's BadValue is dropped, and a message that is not one the
// CRD states (a messageExpression's result, an evaluation error) has the object's strings cut out of it.

type celCheck struct {
	CRD    int             `json:"crd"` // index into the request's crds
	Object json.RawMessage `json:"object"`
}

// celResult answers one check: the violations, or why the rules were not evaluated.
type celResult struct {
	Violations []celViolation `json:"violations,omitempty"`
	Skipped    string         `json:"skipped,omitempty"`
}

type celViolation struct {
	Field   string `json:"field"`   // as the API server names it: spec.resourceGroups[0].flavors
	Path    []any  `json:"path"`    // the same as keys and indices
	Reason  string `json:"reason"`  // the field.ErrorType: FieldValueInvalid, FieldValueForbidden...
	Message string `json:"message"` // the rule's message (or messageExpression's), no value in it
	// "rule": a rule failed; "budget": the cost budget ran out (the API server rejects the object);
	// "evaluation": a rule failed to evaluate (rejected too); "compile": a rule did not compile here.
	Kind string `json:"kind"`
}

// celVersion is what a CRD's served version validates with; built once per helper process.
type celVersion struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	rules      *cel.Validator
	err        error
}

type celCRD struct {
	crd      apiextensionsv1.CustomResourceDefinition
	err      error
	versions map[string]*celVersion
	messages map[string]bool // the details the CRD states itself: its messages, "failed rule: <rule>"
}

var (
	celCRDs   = map[[32]byte]*celCRD{}
	celCRDsMu sync.Mutex
)

func checkCEL(req request) response {
	crds := make([]*celCRD, len(req.CRDs))
	for i, raw := range req.CRDs {
		crds[i] = loadCRD(raw)
	}
	results := make([]celResult, len(req.Checks))
	for i, check := range req.Checks {
		if check.CRD < 0 || check.CRD >= len(crds) {
			results[i] = celResult{Skipped: "no such CRD in the request"}
			continue
		}
		results[i] = crds[check.CRD].check(check.Object)
	}
	return response{CEL: results}
}

func loadCRD(raw json.RawMessage) *celCRD {
	key := sha256.Sum256(raw)
	celCRDsMu.Lock()
	defer celCRDsMu.Unlock()
	if found, ok := celCRDs[key]; ok {
		return found
	}
	loaded := &celCRD{versions: map[string]*celVersion{}, messages: map[string]bool{}}
	var document any
	if err := json.Unmarshal(raw, &document); err == nil {
		statedMessages(document, loaded.messages)
	}
	if err := json.Unmarshal(raw, &loaded.crd); err != nil {
		loaded.err = fmt.Errorf("the CRD does not decode as apiextensions.k8s.io/v1: %v", err)
	} else if loaded.crd.APIVersion != "apiextensions.k8s.io/v1" {
		loaded.err = fmt.Errorf("the CRD is %s, not apiextensions.k8s.io/v1", loaded.crd.APIVersion)
	}
	celCRDs[key] = loaded
	return loaded
}

func (c *celCRD) version(name string) *celVersion {
	celCRDsMu.Lock()
	defer celCRDsMu.Unlock()
	if found, ok := c.versions[name]; ok {
		return found
	}
	built := buildVersion(&c.crd, name)
	c.versions[name] = built
	return built
}

// buildVersion does what customresource_handler.go's getOrCreateServingInfoFor does for one version.
func buildVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *celVersion {
	var validation *apiextensionsv1.CustomResourceValidation
	found := false
	for _, v := range crd.Spec.Versions {
		if v.Name == name {
			validation, found = v.Schema, true
		}
	}
	if !found {
		return &celVersion{err: fmt.Errorf("the CRD serves no version %s", name)}
	}
	if validation == nil || validation.OpenAPIV3Schema == nil {
		return &celVersion{}
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
		return &celVersion{err: fmt.Errorf("the CRD's schema does not convert: %v", err)}
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return &celVersion{err: fmt.Errorf("the CRD's schema is not structural: %v", err)}
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return &celVersion{err: fmt.Errorf("the CRD's defaults do not prune: %v", err)}
	}
	schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return &celVersion{err: fmt.Errorf("the CRD's schema does not convert to OpenAPI: %v", err)}
	}
	return &celVersion{
		structural: structural,
		schema:     schemaValidator,
		rules:      cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// statedMessages collects what schema/cel/validation.go's ruleMessageOrDefault gives for each rule of the CRD
// (all its versions: a message of another version is still no value of the object).
func statedMessages(node any, into map[string]bool) {
	switch node := node.(type) {
	case map[string]any:
		for key, value := range node {
			if rules, ok := value.([]any); ok && key == "x-kubernetes-validations" {
				for _, item := range rules {
					rule, _ := item.(map[string]any)
					message, _ := rule["message"].(string)
					text, _ := rule["rule"].(string)
					if message = strings.TrimSpace(message); message != "" {
						into[message] = true
					} else {
						into["failed rule: "+strings.TrimSpace(text)] = true
					}
				}
			}
			statedMessages(value, into)
		}
	case []any:
		for _, value := range node {
			statedMessages(value, into)
		}
	}
}

func (c *celCRD) check(raw json.RawMessage) (result celResult) {
	defer func() {
		if r := recover(); r != nil {
			result = celResult{Skipped: fmt.Sprintf("the CEL evaluation stopped: %v", r)}
		}
	}()
	if c.err != nil {
		return celResult{Skipped: c.err.Error()}
	}
	// Decoded as the API server decodes a body (k8s.io/apimachinery/pkg/util/json): whole numbers become int64,
	// which the CEL rules of integer and int-or-string fields need.
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil || obj == nil {
		return celResult{Skipped: "the object is not a JSON object"}
	}
	apiVersion, _ := obj["apiVersion"].(string)
	version := c.version(apiVersion[strings.LastIndex(apiVersion, "/")+1:])
	if version.err != nil {
		return celResult{Skipped: version.err.Error()}
	}
	if version.rules == nil {
		return celResult{}
	}
	structuralpruning.PruneWithOptions(obj, version.structural, true, structuralschema.UnknownFieldPathOptions{})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, version.structural)
	structuraldefaulting.Default(obj, version.structural)

	var errs field.ErrorList
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, version.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(nil, obj, version.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, version.structural, obj)...)
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return celResult{Skipped: "the object has schema errors that stop the API server before its CEL rules"}
		}
	}
	found, _ := version.rules.Validate(context.Background(), nil, version.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	values := stringValues(obj)
	for _, err := range found {
		result.Violations = append(result.Violations, violation(err, c.messages, values))
	}
	return result
}

var (
	budgetDetail  = regexp.MustCompile(`running out of cost budget|call cost exceeds limit`)
	compileDetail = regexp.MustCompile(`^rule compiler? (initialization )?error`)
)

func violation(err *field.Error, stated map[string]bool, values []string) celViolation {
	name := err.Field
	if name == "<nil>" {
		name = ""
	}
	detail := err.Detail
	kind := "rule"
	switch {
	case budgetDetail.MatchString(detail):
		kind = "budget"
	case compileDetail.MatchString(detail):
		kind = "compile"
	case err.Type == field.ErrorTypeInternal || strings.Contains(detail, " evaluating rule: ") ||
		strings.Contains(detail, "did not match a supported operator"):
		kind = "evaluation"
	}
	switch {
	case stated[detail]:
	case kind == "rule":
		// A messageExpression's result: it can quote any value of the object, transformed or not (a number, a
		// short string, an upper-cased token), so none of it is shown.
		detail = "the rule's messageExpression message is not shown (it may quote the object's values)"
	default:
		detail = withoutValues(detail, values)
	}
	return celViolation{Field: name, Path: pathSteps(name), Reason: string(err.Type), Message: detail, Kind: kind}
}

// stringValues are the object's strings of 4 characters or more (shorter ones would cut words out of a
// message), longest first.
func stringValues(obj any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(node any) {
		switch node := node.(type) {
		case map[string]any:
			for _, value := range node {
				walk(value)
			}
		case []any:
			for _, value := range node {
				walk(value)
			}
		case string:
			if len(node) >= 4 {
				seen[node] = true
			}
		}
	}
	walk(obj)
	values := make([]string, 0, len(seen))
	for value := range seen {
		values = append(values, value)
	}
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	return values
}

func withoutValues(text string, values []string) string {
	for _, value := range values {
		text = strings.ReplaceAll(text, value, "(value not shown)")
	}
	return text
}

// pathSteps splits field.Path's String form: names joined by ".", indices and map keys in brackets.
func pathSteps(name string) []any {
	steps := []any{}
	for name != "" {
		switch {
		case name[0] == '.':
			name = name[1:]
		case name[0] == '[':
			end := strings.IndexByte(name, ']')
			if end < 0 {
				return append(steps, name[1:])
			}
			key := name[1:end]
			if index, err := strconv.Atoi(key); err == nil {
				steps = append(steps, index)
			} else {
				steps = append(steps, key)
			}
			name = name[end+1:]
		default:
			end := strings.IndexAny(name, ".[")
			if end < 0 {
				end = len(name)
			}
			steps = append(steps, name[:end])
			name = name[end:]
		}
	}
	return steps
}
