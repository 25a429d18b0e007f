// eks-gpu-gitops-helper renders what Flux applies, with Flux's and Helm's own code, for the Python tool
// (eks_gpu_gitops/render/helper.py). The tool starts one per core, from its wheel (hatch_build.py builds it
// into every platform wheel), and sends it one JSON request per line on stdin; it answers each with one JSON
// line on stdout and exits when stdin closes. The requests, by "op":
//
//   - "build" {root, path}: `kustomize build` of a folder, confined to root (the eksctl overlays).
//   - "flux" {root, path, kustomization}: a Flux Kustomization's path as kustomize-controller builds it (flux.go).
//   - "substitute" {kustomization, objects, sources, unknown, anyUnknown}: its post-build substitution
//     (substitute.go).
//   - "chart" {...}: fetch a chart into the cache as source-controller would give it to helm-controller (chart.go).
//   - "helm" {release, chart, sources, kubeVersion, apiVersions}: a HelmRelease as helm-controller installs it
//     (helm.go).
//   - "observe" {root, reads}: what each of a build's reads gives now (deps.go), so a kept build is reused
//     only while every read gives what it gave.
//   - "cel" {crds, checks: [{crd, object}]}: each object against its CRD's x-kubernetes-validations rules as
//     the API server evaluates them on create (cel.go); one answer per check, in order.
//
// build and flux answer with what the build read ("reads"), and refuse a file over the limits of limits.go
// ("refused", one line naming it) before kustomize expands it.
//
// Every answer is {"error": "..."} when the request fails; a panic in a library becomes such an answer, so
// the next request still runs.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"sigs.k8s.io/kustomize/kyaml/openapi"
)

type request struct {
	Op string `json:"op"`
	// build and flux
	Root          string         `json:"root"`
	Path          string         `json:"path"`
	Kustomization map[string]any `json:"kustomization"`
	// substitute
	Objects    []map[string]any `json:"objects"`
	Sources    []map[string]any `json:"sources"`
	Unknown    []string         `json:"unknown"`
	AnyUnknown bool             `json:"anyUnknown"`
	// chart
	Chart chartRequest `json:"chart"`
	// helm
	Release   map[string]any `json:"release"`
	ChartPath string         `json:"chartPath"`
	// what helm-controller appends to the chart's version (+metadata) for an OCIRepository's chart
	ChartVersionMetadata string   `json:"chartVersionMetadata"`
	KubeVersion          string   `json:"kubeVersion"`
	APIVersions          []string `json:"apiVersions"`
	// observe: [kind, path] of each read (deps.go)
	Reads [][]string `json:"reads"`
	// cel: the CRDs (apiextensions.k8s.io/v1, as JSON) and the objects, each naming its CRD by index
	CRDs   []json.RawMessage `json:"crds"`
	Checks []celCheck        `json:"checks"`
}

type response struct {
	YAML    string `json:"yaml,omitempty"`
	Error   string `json:"error,omitempty"`
	Origins bool   `json:"origins,omitempty"`
	// helm: the rendered documents, as JSON
	Documents []json.RawMessage `json:"documents,omitempty"`
	// substitute
	Objects []substituted `json:"objects,omitempty"`
	// chart
	Fetched *fetched `json:"fetched,omitempty"`
	// build and flux: what the build read (deps.go); Refused: a file it read is over a limit (limits.go)
	Reads   []read `json:"reads,omitempty"`
	Refused string `json:"refused,omitempty"`
	// observe: the value of each read now
	Values []string `json:"values,omitempty"`
	// cel: per check, in order
	CEL []celResult `json:"cel,omitempty"`
}

// builtinSchema makes kyaml's global schema the built-in one, as Flux's resetOpenAPIWithBuiltins does,
// and returns the version it reports in that state.
func builtinSchema() string {
	openapi.ResetOpenAPI()
	_ = openapi.Schema()
	return openapi.GetSchemaVersion()
}

// cleanSchema is the version kyaml's global schema reports in its built-in state, once a request that runs
// kustomize has parsed it (about 60 ms, which a helper started only to observe reads or fetch charts skips).
var cleanSchema string

// withSchema makes sure kyaml's built-in schema is parsed before a request that reads it.
func withSchema() {
	if cleanSchema == "" {
		cleanSchema = builtinSchema()
	}
}

func answer(line []byte) (reply response) {
	defer func() {
		if r := recover(); r != nil {
			reply = response{Error: fmt.Sprintf("recovered from a panic: %v", r)}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: fmt.Sprintf("eks-gpu-gitops-helper: bad request: %v", err)}
	}
	if req.Op != "observe" && req.Op != "chart" && req.Op != "cel" {
		withSchema()
	}
	switch req.Op {
	case "", "build":
		return plainBuild(req)
	case "flux":
		return fluxBuild(req)
	case "substitute":
		return substitute(req)
	case "chart":
		return fetchChart(req.Chart)
	case "helm":
		return renderRelease(req)
	case "observe":
		return observe(req)
	case "cel":
		return checkCEL(req)
	}
	return response{Error: fmt.Sprintf("eks-gpu-gitops-helper: unknown op %q", req.Op)}
}

func main() {
	// A chart's render allocates a lot that lives briefly (Helm's, then kustomize's parse of every manifest):
	// collecting at 4x the live heap instead of 2x takes a third off a Kueue render for ~100 MB more.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for {
		line, readErr := in.ReadBytes('\n')
		if len(line) > 0 {
			reply := answer(line)
			if cleanSchema != "" && openapi.GetSchemaVersion() != cleanSchema {
				cleanSchema = builtinSchema()
			}
			if err := encoder.Encode(reply); err != nil {
				os.Exit(1)
			}
			if err := out.Flush(); err != nil {
				os.Exit(1)
			}
		}
		if readErr == io.EOF {
			return
		}
		if readErr != nil {
			fmt.Fprintf(os.Stderr, "eks-gpu-gitops-helper: %v\n", readErr)
			os.Exit(1)
		}
	}
}
