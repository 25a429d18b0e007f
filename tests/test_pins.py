"""What the template pins agrees with what it is tested against and with the tool it ships: the control plane's
versions, the tool version a bake pins, the schemas the tool knows, and the EFA device plugin's instance types."""

from __future__ import annotations

import json
import re

import yaml

from conftest import REPO, TEMPLATE
from eks_gpu_gitops import __version__
from eks_gpu_gitops.facts.schemas import SCHEMAS
from eks_gpu_gitops.generate.bake import efa_instance_types

ANSWERS = json.loads((TEMPLATE / "cookiecutter.json").read_text())


def test_the_control_plane_matches_the_default_cluster_and_the_mpi_operator_pin():
    script = (TEMPLATE / "tools" / "build-control-plane.sh").read_text()
    go_mod = (TEMPLATE / "tools" / "control-plane" / "kubernetes" / "go.mod").read_text()
    makefile = (TEMPLATE / "Makefile").read_text()

    kubernetes = re.search(r"^\s*k8s\.io/kubernetes v(\d+\.\d+)\.\d+$", go_mod, re.MULTILINE).group(1)
    assert kubernetes == ANSWERS["kubernetes_version"]
    assert re.search(r"^MPI_OPERATOR_VERSION=(\S+)$", script, re.MULTILINE).group(1) == ANSWERS["_mpi_operator_version"]
    built = re.search(r"^CONTROL_PLANE_VERSION := (\S+)$", makefile, re.MULTILINE).group(1)
    assert built == "v" + re.search(r"k8s\.io/kubernetes v(\S+)$", go_mod, re.MULTILINE).group(1)


def test_a_bake_pins_the_tool_of_this_commit():
    """One version for the tool (tool/src/eks_gpu_gitops/__init__.py); the template's requirements.txt pins the
    same one, so a bake of an unreleased commit installs the wheel `make dist` builds from it. The pin is plain
    text, not a cookiecutter variable: `cruft update` keeps the private variables a repository was baked with."""
    pins = [line for line in (REPO / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert pins == [f"eks-gpu-gitops=={__version__}"]


def test_a_bake_pins_the_schemas_the_tool_knows():
    assert yaml.safe_load((REPO / "platform.yaml").read_text())["schemas"] == SCHEMAS


def test_the_efa_device_plugin_runs_on_every_efa_type_of_the_catalogue():
    daemonset = yaml.safe_load((REPO / "overlays/base/device-plugins/efa/daemonset.yaml").read_text())
    terms = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    [types] = [e["values"] for e in terms[0]["matchExpressions"] if e["key"] == "node.kubernetes.io/instance-type"]
    assert types == efa_instance_types() and "p5.48xlarge" in types
