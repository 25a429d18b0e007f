package main

import (
	"fmt"
	"path/filepath"

	generator "github.com/fluxcd/pkg/kustomize"
	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const originAnnotation = "config.kubernetes.io/origin"

// plainBuild is `kustomize build` of one folder, reading nothing outside root: what a person runs on the
// eksctl overlays (fluxcd/pkg/kustomize Build on a secure file system: no plugins, no remote bases).
func plainBuild(req request) response {
	if req.Root == "" || req.Path == "" {
		return response{Error: "a build request needs root and path"}
	}
	fs, err := secureFS(req.Root)
	if err != nil {
		return response{Error: err.Error()}
	}
	r := newRecorder(fs, req.Root)
	resources, err := build(r, req.Path)
	return withReads(stream(resources, err), r)
}

// secureFS is the checkout root as fluxcd/pkg/kustomize's SecureBuild sees it: every path, followed through
// links, confined to root.
func secureFS(root string) (filesys.FileSystem, error) {
	return securefs.MakeFsOnDiskSecure(root)
}

// withReads adds what the build read to its answer (deps.go), or makes the answer the one-line refusal of a
// file over a limit when the build read one.
func withReads(reply response, r *recorder) response {
	if r.refused != nil {
		return response{Refused: r.refused.Error()}
	}
	reply.Reads = r.list()
	return reply
}

// fluxBuild builds a Flux Kustomization's path as kustomize-controller v1.9.5 does
// (internal/controller/kustomization_controller.go, generate and build): fluxcd/pkg/kustomize v1.35.6's
// Generator writes the kustomization file from the folder's own (or one listing the folder's manifests) and
// the Kustomization's spec (targetNamespace, namePrefix/nameSuffix, patches, components, images), then
// SecureBuild builds it with every read confined to root. The controller writes that file into its private
// copy of the artifact; here the file only exists for this build (generatedFS), so builds of the same
// checkout can run side by side. Then what the controller checks on every object (apiVersion, kind, name)
// and, from its apply step, spec.commonMetadata (ssa/utils SetCommonMetadata).
//
// Where the generated file lists plain manifests, it also asks kustomize for origin annotations and reports
// that (Origins), so the tool can tell which file each object came from and then removes them.
func fluxBuild(req request) response {
	if req.Root == "" || req.Path == "" || req.Kustomization == nil {
		return response{Error: "a flux request needs root, path and kustomization"}
	}
	object := unstructured.Unstructured{Object: req.Kustomization}
	dir := filepath.Join(req.Root, req.Path)
	manifest, kfile, action, err := generator.NewGenerator(req.Root, object).GenerateManifest(dir)
	disk, fsErr := secureFS(req.Root)
	if fsErr != nil {
		return response{Error: fsErr.Error()}
	}
	r := newRecorder(disk, req.Root)
	recordGenerator(r, dir)
	if err != nil {
		return withReads(response{Error: err.Error()}, r)
	}
	origins := false
	if action == generator.CreatedAction {
		manifest, origins, err = withOrigins(manifest)
		if err != nil {
			return response{Error: err.Error()}
		}
	}
	resources, err := build(generatedFS{FileSystem: r, path: kfile, data: manifest}, dir)
	if err != nil {
		return withReads(response{Error: err.Error()}, r)
	}
	for _, res := range resources.Resources() {
		if res.GetName() == "" || res.GetKind() == "" || res.GetApiVersion() == "" {
			return withReads(response{Error: fmt.Sprintf("failed to decode Kubernetes apiVersion, kind and name from: %v", res.String())}, r)
		}
	}
	reply := stream(resources, nil)
	if reply.Error != "" {
		return withReads(reply, r)
	}
	reply.Origins = origins
	return withReads(withCommonMetadata(reply, object), r)
}

// build is fluxcd/pkg/kustomize's Build (krusty with LoadRestrictionsNone and plugins disabled, a panic
// recovered) but for one thing, for speed: Build parses kyaml's built-in OpenAPI schema anew for every build
// (about 60 ms) and empties it after; here it is parsed once, and again only after a build whose
// kustomization set `openapi:` changed it (main.go), so every build starts from the same schema as one of
// Flux's does. Builds run one at a time per process, as Build's mutex makes them.
func build(fs filesys.FileSystem, dir string) (res resmap.ResMap, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered from kustomize build panic: %v", r)
		}
	}()
	kustomizer := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	})
	return kustomizer.Run(fs, dir)
}

// withOrigins adds originAnnotations to a generated kustomization that lists resources and does not ask
// for it already.
func withOrigins(manifest []byte) ([]byte, bool, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(manifest, &doc); err != nil {
		return nil, false, err
	}
	if _, listed := doc["resources"]; !listed {
		return manifest, false, nil
	}
	if _, set := doc["buildMetadata"]; set {
		return manifest, false, nil
	}
	doc["buildMetadata"] = []string{"originAnnotations"}
	out, err := yaml.Marshal(doc)
	return out, err == nil, err
}

func withCommonMetadata(reply response, kustomization unstructured.Unstructured) response {
	labels, _, _ := unstructured.NestedStringMap(kustomization.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(kustomization.Object, "spec", "commonMetadata", "annotations")
	if len(labels) == 0 && len(annotations) == 0 {
		return reply
	}
	objects, err := utils.ReadObjects(stringReader(reply.YAML))
	if err != nil {
		return response{Error: err.Error()}
	}
	utils.SetCommonMetadata(objects, labels, annotations)
	text, err := utils.ObjectsToYAML(objects)
	if err != nil {
		return response{Error: err.Error()}
	}
	reply.YAML = text
	return reply
}

func stream(resources resmap.ResMap, err error) response {
	if err != nil {
		if err.Error() == "" {
			return response{Error: "kustomize build failed without a message"}
		}
		return response{Error: err.Error()}
	}
	out, err := resources.AsYaml()
	if err != nil {
		return response{Error: err.Error()}
	}
	return response{YAML: string(out)}
}

// generatedFS is the checkout with the kustomization file Flux's generator wrote, for one build.
type generatedFS struct {
	filesys.FileSystem
	path string
	data []byte
}

func (g generatedFS) ReadFile(path string) ([]byte, error) {
	if filepath.Clean(path) == g.path {
		return g.data, nil
	}
	return g.FileSystem.ReadFile(path)
}

func (g generatedFS) Exists(path string) bool {
	return filepath.Clean(path) == g.path || g.FileSystem.Exists(path)
}
