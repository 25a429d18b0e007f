// kustomize-batch builds many kustomizations in one process, the way kustomize-controller builds one.
//
// The tool (eks_gpu_gitops/render/kustomize.py) starts one per core, from its wheel, where every platform wheel
// carries it (hatch_build.py builds it), and sends it one request per line on stdin, {"root": DIR, "path": DIR};
// it answers each with one line on stdout, {"yaml": "..."} or {"error": "..."}, and exits when stdin closes.
// Without it, the tool runs one `kustomize build` process per folder, and on a fleet most of that time goes
// into starting kubectl.
//
// Each build is what kustomize-controller v1.9.4 does (internal/controller/kustomization_controller.go,
// build): fluxcd/pkg/kustomize v1.35.4 SecureBuild(root, path, false), which reads only below root
// (filesys.MakeFsOnDiskSecure) and runs krusty with LoadRestrictionsNone and plugins disabled
// (kustomize_generator.go, Build), then ResMap.AsYaml. One difference, for speed: Build parses kyaml's
// built-in OpenAPI schema anew for every build (about 60 ms); here it is parsed once and again only after
// a build whose kustomizations set `openapi:` changed it, so every build starts from the same schema as
// one of Flux's does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

type request struct {
	Root string `json:"root"`
	Path string `json:"path"`
}

type response struct {
	YAML  string `json:"yaml,omitempty"`
	Error string `json:"error,omitempty"`
}

// builtinSchema makes kyaml's global schema the built-in one, as Flux's resetOpenAPIWithBuiltins does,
// and returns the version it reports in that state.
func builtinSchema() string {
	openapi.ResetOpenAPI()
	_ = openapi.Schema()
	return openapi.GetSchemaVersion()
}

func build(root, path string) (out []byte, err error) {
	// kustomize can panic on odd input; Flux recovers too, so the next build still runs.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered from kustomize build panic: %v", r)
		}
	}()
	fs, err := securefs.MakeFsOnDiskSecure(root)
	if err != nil {
		return nil, err
	}
	kustomizer := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	})
	resources, err := kustomizer.Run(fs, path)
	if err != nil {
		return nil, err
	}
	return resources.AsYaml()
}

func answer(line []byte) response {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: fmt.Sprintf("kustomize-batch: bad request: %v", err)}
	}
	if req.Root == "" || req.Path == "" {
		return response{Error: "kustomize-batch: a request needs root and path"}
	}
	out, err := build(req.Root, req.Path)
	if err != nil {
		if err.Error() == "" {
			return response{Error: "kustomize build failed without a message"}
		}
		return response{Error: err.Error()}
	}
	return response{YAML: string(out)}
}

func main() {
	clean := builtinSchema()
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for {
		line, readErr := in.ReadBytes('\n')
		if len(line) > 0 {
			reply := answer(line)
			if openapi.GetSchemaVersion() != clean {
				clean = builtinSchema()
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
			fmt.Fprintf(os.Stderr, "kustomize-batch: %v\n", readErr)
			os.Exit(1)
		}
	}
}
