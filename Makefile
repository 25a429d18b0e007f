# The template repository: `make demo` shows what it makes, `make test` proves it, `make dist` builds the tool.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCHEMAS ?= $(abspath ../shared/schemas)
DEMO_DIR ?= demo
# TensorFlow + Horovod for the trainer tests, kept outside the template folder so bakes stay small.
TRAINER_VENV ?= $(abspath .venv-trainer)
TOOLS_CACHE ?= $(HOME)/.cache/gitops-template
# The Flux CLI the render tests compare the tool's renders with (`flux build kustomization`), built once into a
# cache outside the repository (tools/build-flux.sh says why it is not a plain `go install`).
FLUX_VERSION := v2.9.5
FLUX := $(TOOLS_CACHE)/flux-$(FLUX_VERSION)/flux
# The pipeline tools/bench_pipeline.py times validate against (kustomize, then kubeconform), and the Helm CLI of
# helm-controller v1.6.4 (Flux v2.9.5's), built once the same way from the Go module proxy (tools/build-go-tool.sh).
KUBECONFORM_VERSION := v0.8.0
KUBECONFORM := $(TOOLS_CACHE)/kubeconform-$(KUBECONFORM_VERSION)/kubeconform
HELM_VERSION := v4.2.4
HELM := $(TOOLS_CACHE)/helm-$(HELM_VERSION)/helm
# The local control plane of the live-cluster tests (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kwok, the MPI operator) and the controllers of the GitOps loop (Flux's source-, kustomize- and helm-controller,
# Kueue), built once from the Go module proxy by the tool's own builder, the one a user runs as
# `scripts/toolchain build` (tool/src/eks_gpu_gitops/live/toolchain.py says how and which versions). A run with
# every binary there at its pinned version is instant, so the targets run it every time.
CONTROL_PLANE_VERSION := v1.34.4
CONTROL_PLANE := $(TOOLS_CACHE)/control-plane-$(CONTROL_PLANE_VERSION)
# The tool (tool/): its Go helper, built into the package for the editable install the tests and the demo use;
# `make dist` builds the wheel, which carries its own (tool/hatch_build.py).
HELPER_SOURCE := tool/helper
HELPER := tool/src/eks_gpu_gitops/_helper/eks-gpu-gitops-helper
TOOL_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' tool/src/eks_gpu_gitops/__init__.py)
WHEEL := dist/.built-$(TOOL_VERSION)

.PHONY: help setup helper dist docs flux kubeconform helm control-plane toolchain controllers demo lint format test test-tool test-template e2e bench clean

help:
	@echo "make demo          bake the default project into $(DEMO_DIR)/ and walk its loop: render, validate, a pull-request diff"
	@echo "make dist          build the tool's wheel for this machine (with its Go helper) into dist/"
	@echo "make control-plane build the local control plane (etcd, Kubernetes, kwok, the MPI operator) with Go; make controllers: Flux's and Kueue's"
	@echo "make docs          write the tool's generated documents again (rules, diff notices, commands)"
	@echo "make lint          ruff check and ruff format --check over all Python (template, tool, generated code)"
	@echo "make format        ruff format and the safe ruff fixes"
	@echo "make test          lint, then the tool's tests (tool/tests), the template's (tests/) and the GitOps loop (make e2e)"
	@echo "make e2e           Flux, Kueue and the MPI operator reconcile a baked project on the local control plane (tests/e2e)"
	@echo "make bench         validate and diff on a fleet vs kustomize alone and vs kustomize + kubeconform; the render cache; trainer samples/s"

$(BIN)/.installed: requirements-dev.txt tool/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(BIN)/.installed

# The editable install renders with this build of the helper (Go is needed: the tool renders with nothing else).
helper: $(HELPER)

$(HELPER): $(wildcard $(HELPER_SOURCE)/*.go) $(HELPER_SOURCE)/go.mod $(HELPER_SOURCE)/go.sum
	@echo "building the helper $@ with $$(go version | cut -d' ' -f3)"
	cd "$(HELPER_SOURCE)" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$(abspath $@).part" . && mv "$(abspath $@).part" "$(abspath $@)"

dist: $(WHEEL)

$(WHEEL): $(BIN)/.installed $(shell git ls-files tool/src tool/helper tool/pyproject.toml tool/hatch_build.py 2>/dev/null)
	rm -f dist/eks_gpu_gitops-*.whl
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist ./tool
	@ls dist/eks_gpu_gitops-*.whl
	touch $@

# The tool's generated reference documents (tool/tests/test_docs.py fails when one is stale).
docs: setup
	$(BIN)/eks-gpu-gitops validate --list-rules --format markdown > tool/docs/rules.md
	$(BIN)/eks-gpu-gitops diff --list-notices --format markdown > tool/docs/diff-notices.md
	$(BIN)/python -m eks_gpu_gitops.cli.reference > tool/docs/commands.md

flux: $(FLUX)

$(FLUX):
	tools/build-flux.sh $(FLUX_VERSION) $@

kubeconform: $(KUBECONFORM)

$(KUBECONFORM):
	tools/build-go-tool.sh github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION) $@ main.version

helm: $(HELM)

$(HELM):
	tools/build-go-tool.sh helm.sh/helm/v4/cmd/helm@$(HELM_VERSION) $@ helm.sh/helm/v4/internal/version.version

control-plane: setup
	$(BIN)/eks-gpu-gitops toolchain build --into $(CONTROL_PLANE) control-plane

# Both groups, in one build: what make test needs (simulate's tests run Kueue; the e2e tier, Flux's controllers).
toolchain: setup
	$(BIN)/eks-gpu-gitops toolchain build --into $(CONTROL_PLANE)

controllers: setup
	$(BIN)/eks-gpu-gitops toolchain build --into $(CONTROL_PLANE) controllers

# Schemas from SCHEMAS when that folder exists (no network here), else downloaded from their pinned URLs.
demo: setup helper
	$(if $(wildcard $(SCHEMAS)),GITOPS_SCHEMA_DIR=$(SCHEMAS)) $(BIN)/python tools/demo.py --out $(DEMO_DIR)

# One ruff cache at the top: a cache inside {{cookiecutter.project_slug}}/ would be baked into projects.
RUFF := RUFF_CACHE_DIR=$(abspath .ruff_cache) $(BIN)/ruff

lint: setup
	$(RUFF) check .
	$(RUFF) format --check .

format: setup
	$(RUFF) check --fix .
	$(RUFF) format .

CORPUS ?= $(abspath ../shared/corpus)
TEST_ENV := GITOPS_SCHEMA_DIR=$(SCHEMAS) GITOPS_FLUX=$(FLUX) GITOPS_REQUIRE_FLUX=1 \
  GITOPS_CONTROL_PLANE_BIN=$(CONTROL_PLANE) GITOPS_REQUIRE_CONTROL_PLANE=1 \
  GITOPS_HELM=$(HELM) GITOPS_REQUIRE_CHARTS=1 GITOPS_CORPUS_DIR=$(CORPUS) TOOLS_CACHE=$(TOOLS_CACHE)

# The Go builds first, each in its own process (make -j runs them side by side), then the two suites.
test: lint
	$(MAKE) --no-print-directory -j 3 $(FLUX) toolchain $(HELPER) $(HELM) $(WHEEL)
	$(MAKE) --no-print-directory test-tool test-template e2e

test-tool: setup
	$(TEST_ENV) $(BIN)/python -m pytest -q -n 2 --dist loadfile tool/tests

test-template: setup
	$(TEST_ENV) TRAINER_VENV=$(TRAINER_VENV) TOOL_DIST=$(abspath dist) \
	  $(BIN)/python -m pytest -q -n 2 --dist loadfile --ignore=tests/e2e tests

# The GitOps loop for real (tests/e2e/README.md): Flux's controllers reconcile a baked project served from loopback
# into the local control plane. E2E_BIN: a folder put first on PATH, for binaries $(CONTROL_PLANE) does not hold;
# E2E_PROJECT: a baked, committed repository to run instead of a fresh bake.
E2E_BIN ?=
e2e: setup helper toolchain
	$(TEST_ENV) GITOPS_E2E=1 $(if $(E2E_BIN),PATH=$(abspath $(E2E_BIN)):$$PATH) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/e2e

bench: setup helper kubeconform helm
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) GITOPS_KUBECONFORM=$(KUBECONFORM) $(BIN)/python tools/bench_pipeline.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) GITOPS_HELM=$(HELM) $(BIN)/python tools/bench_helm.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench_diff.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench_cache.py
	$(MAKE) -C "{{cookiecutter.project_slug}}/trainer" bench VENV=$(TRAINER_VENV)

clean:
	rm -rf $(DEMO_DIR) dist .pytest_cache .ruff_cache
