# The template repository: `make demo` shows what it makes, `make test` proves it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCHEMAS ?= $(abspath ../shared/schemas)
DEMO_DIR ?= demo
# TensorFlow + Horovod for the trainer tests, kept outside the template folder so bakes stay small.
TRAINER_VENV ?= $(abspath .venv-trainer)
# The Flux CLI the render tests compare scripts/render with (`flux build kustomization`), built once into a
# cache outside the repository (tools/build-flux.sh says why it is not a plain `go install`).
FLUX_VERSION := v2.9.5
TOOLS_CACHE ?= $(HOME)/.cache/gitops-template
FLUX := $(TOOLS_CACHE)/flux-$(FLUX_VERSION)/flux
# The local control plane of the live-cluster tests (etcd, kube-apiserver, kube-scheduler, kwok, the MPI
# operator), built once from the Go module proxy (tools/build-control-plane.sh says how and which versions).
CONTROL_PLANE_VERSION := v1.34.4
CONTROL_PLANE := $(TOOLS_CACHE)/control-plane-$(CONTROL_PLANE_VERSION)
# kustomize-batch, the renders' in-process kustomize (the generated repository's scripts/kustomize-batch), built
# into the tooling environment the tests run the scripts with; Go keeps its module and build caches.
KUSTOMIZE_BATCH_SOURCE := {{cookiecutter.project_slug}}/scripts/kustomize-batch
KUSTOMIZE_BATCH := $(BIN)/kustomize-batch

.PHONY: help setup flux control-plane kustomize-batch demo lint format test bench clean

help:
	@echo "make demo          bake the default project into $(DEMO_DIR)/, render both environments, show what Flux applies"
	@echo "make lint          ruff check and ruff format --check over all Python (template and generated code)"
	@echo "make format        ruff format and the safe ruff fixes"
	@echo "make test          lint, then everything: template bakes, generated repositories' checks, trainer tests"
	@echo "make bench         validate and diff on a 24-environment fleet vs kustomize alone; the render cache on a"
	@echo "                   20-environment fleet (cold, warm, a one-environment diff); trainer samples/s"

$(BIN)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(BIN)/.installed

flux: $(FLUX)

$(FLUX):
	tools/build-flux.sh $(FLUX_VERSION) $@

control-plane: $(CONTROL_PLANE)/.built

kustomize-batch: $(KUSTOMIZE_BATCH)

$(KUSTOMIZE_BATCH): $(BIN)/.installed $(KUSTOMIZE_BATCH_SOURCE)/main.go $(KUSTOMIZE_BATCH_SOURCE)/go.mod $(KUSTOMIZE_BATCH_SOURCE)/go.sum
	cd "$(KUSTOMIZE_BATCH_SOURCE)" && go build -trimpath -o "$(abspath $@)" .

$(CONTROL_PLANE)/.built: tools/build-control-plane.sh tools/control-plane/kubernetes/go.mod tools/control-plane/etcd/go.mod
	tools/build-control-plane.sh $(CONTROL_PLANE)
	touch $@

demo: setup
	$(BIN)/python tools/demo.py --out $(DEMO_DIR)

# One ruff cache at the top: a cache inside {{cookiecutter.project_slug}}/ would be baked into projects.
RUFF := RUFF_CACHE_DIR=$(abspath .ruff_cache) $(BIN)/ruff

lint: setup
	$(RUFF) check .
	$(RUFF) format --check .

format: setup
	$(RUFF) check --fix .
	$(RUFF) format .

test: lint $(FLUX) control-plane $(KUSTOMIZE_BATCH)
	GITOPS_SCHEMA_DIR=$(SCHEMAS) TRAINER_VENV=$(TRAINER_VENV) GITOPS_FLUX=$(FLUX) GITOPS_REQUIRE_FLUX=1 \
	  GITOPS_CONTROL_PLANE_BIN=$(CONTROL_PLANE) GITOPS_REQUIRE_CONTROL_PLANE=1 GITOPS_REQUIRE_KUSTOMIZE_BATCH=1 \
	  $(BIN)/python -m pytest -q -n 2 --dist loadfile tests

bench: setup $(KUSTOMIZE_BATCH)
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench_diff.py
	GITOPS_SCHEMA_DIR=$(SCHEMAS) $(BIN)/python tools/bench_cache.py
	$(MAKE) -C "{{cookiecutter.project_slug}}/trainer" bench VENV=$(TRAINER_VENV)

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .ruff_cache
