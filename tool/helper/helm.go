package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/Masterminds/semver/v3"
	"io"
	"strings"

	v2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/helm-controller/internal/postrender"
	"github.com/fluxcd/helm-controller/internal/release"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/go-logr/logr"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	helmchart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// renderRelease renders a HelmRelease's chart as helm-controller v1.6.4 installs it, client-side:
//
//   - values: chartutil.ChartValuesFromReferences (fluxcd/pkg/chartutil v1.27.2) over spec.valuesFrom, read
//     from the sources given (the ConfigMaps and Secrets the environment renders), then spec.values, as
//     internal/controller/helmrelease_controller.go composes them;
//   - the install action as internal/action/install.go newInstall sets it (release name shortened by
//     internal/release.ShortenName, the release namespace, hooks, schema validation, Devel, post-renderers from
//     internal/postrender.BuildPostRenderers with the combined strategy), run by Helm v4.2.4's Install in
//     client-only dry-run mode against the Kubernetes version and API versions given (what `helm template`
//     does);
//   - CRDs: helm-controller applies a chart's crds/ itself (internal/action/crds.go), Create by default, none
//     with the Skip policy, labelled with the release's origin as its setOriginVisitor does.
//
// Hooks are part of what reaches the cluster (helm-controller runs them), except test hooks unless
// spec.test.enable.
func renderRelease(req request) response {
	data, err := json.Marshal(req.Release)
	if err != nil {
		return response{Error: err.Error()}
	}
	var obj v2.HelmRelease
	if err := json.Unmarshal(data, &obj); err != nil {
		return response{Error: fmt.Sprintf("HelmRelease: %v", err)}
	}
	values, err := chartutil.ChartValuesFromReferences(context.Background(), logr.Discard(), newSourceReader(req.Sources),
		obj.Namespace, obj.GetValues(), obj.Spec.ValuesFrom...)
	if err != nil {
		return response{Error: err.Error()}
	}
	chrt, err := loader.Load(req.ChartPath)
	if err != nil {
		return response{Error: fmt.Sprintf("could not load chart: %v", err)}
	}
	// helm-controller v1.6.4 templates a chart from an OCIRepository with the artifact's digest in its version
	// (internal/controller/helmrelease_controller.go, mutateChartWithSourceRevision), which charts show in labels.
	if req.ChartVersionMetadata != "" {
		version, err := semver.NewVersion(chrt.Metadata.Version)
		if err != nil {
			return response{Error: fmt.Sprintf("invalid chart version %s", chrt.Metadata.Version)}
		}
		withDigest, err := version.SetMetadata(req.ChartVersionMetadata)
		if err != nil {
			return response{Error: err.Error()}
		}
		chrt.Metadata.Version = withDigest.String()
	}
	install := helmaction.NewInstall(&helmaction.Configuration{})
	install.ReleaseName = release.ShortenName(obj.GetReleaseName())
	install.Namespace = obj.GetReleaseNamespace()
	install.DisableHooks = obj.GetInstall().DisableHooks
	install.DisableOpenAPIValidation = obj.GetInstall().DisableOpenAPIValidation
	install.SkipSchemaValidation = obj.GetInstall().DisableSchemaValidation
	install.Devel = true
	install.SkipCRDs = true
	install.Replace = true
	install.PostRenderer = postrender.BuildPostRenderers(&obj)
	install.PostRenderStrategy = helmaction.PostRenderStrategyCombined
	if strategy := obj.GetPostRenderStrategy(); strategy != "" {
		install.PostRenderStrategy = helmaction.PostRenderStrategy(strategy)
	}
	install.DryRunStrategy = helmaction.DryRunClient
	if req.KubeVersion != "" {
		version, err := common.ParseKubeVersion(req.KubeVersion)
		if err != nil {
			return response{Error: fmt.Sprintf("kubernetes version %q: %v", req.KubeVersion, err)}
		}
		install.KubeVersion = version
	}
	install.APIVersions = common.VersionSet(req.APIVersions)
	released, err := install.RunWithContext(context.Background(), chrt, values.AsMap())
	if err != nil {
		return response{Error: err.Error()}
	}
	rel, ok := released.(*helmrelease.Release)
	if !ok {
		return response{Error: "only the Chart API v2 is supported"}
	}
	var out strings.Builder
	policy := obj.GetInstall().CRDs
	if policy != v2.Skip {
		crds, err := chartCRDs(chrt.CRDObjects(), obj)
		if err != nil {
			return response{Error: err.Error()}
		}
		out.WriteString(crds)
	}
	out.WriteString("---\n" + strings.TrimSpace(rel.Manifest) + "\n")
	if !install.DisableHooks {
		for _, hook := range rel.Hooks {
			if isTestHook(hook) && (obj.Spec.Test == nil || !obj.Spec.Test.Enable) {
				continue
			}
			out.WriteString("---\n" + strings.TrimSpace(hook.Manifest) + "\n")
		}
	}
	documents, err := jsonDocuments(out.String())
	if err != nil {
		return response{Error: fmt.Sprintf("the chart's output: %v", err)}
	}
	return response{Documents: documents}
}

// jsonDocuments are the documents of a YAML stream as JSON, converted as the API machinery converts what it
// is sent (sigs.k8s.io/yaml), so the tool reads them without a YAML parser of its own; empty ones are left out.
func jsonDocuments(text string) ([]json.RawMessage, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	documents := []json.RawMessage{}
	for {
		document, err := reader.Read()
		if err == io.EOF {
			return documents, nil
		}
		if err != nil {
			return nil, err
		}
		converted, err := yaml.YAMLToJSON(document)
		if err != nil {
			return nil, err
		}
		if trimmed := bytes.TrimSpace(converted); len(trimmed) > 0 && string(trimmed) != "null" {
			documents = append(documents, json.RawMessage(trimmed))
		}
	}
}

func chartCRDs(crds []helmchart.CRD, obj v2.HelmRelease) (string, error) {
	var text bytes.Buffer
	for _, crd := range crds {
		text.WriteString("---\n")
		text.Write(crd.File.Data)
		text.WriteString("\n")
	}
	if text.Len() == 0 {
		return "", nil
	}
	labelled, err := postrender.NewOriginLabels(v2.GroupVersion.Group, obj.Namespace, obj.Name).Run(&text)
	if err != nil {
		return "", fmt.Errorf("CRDs: %v", err)
	}
	return labelled.String(), nil
}

func isTestHook(hook *helmrelease.Hook) bool {
	for _, event := range hook.Events {
		if event == helmrelease.HookTest {
			return true
		}
	}
	return false
}
