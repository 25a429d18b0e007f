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
from eks_gpu_gitops.live import toolchain

ANSWERS = json.loads((TEMPLATE / "cookiecutter.json").read_text())


def test_the_control_plane_matches_the_default_cluster_and_the_mpi_operator_pin():
    """The binaries the tool builds (live/toolchain.py) are the template's pins: Kubernetes at the default bake's
    minor, the MPI operator and Kueue as cookiecutter.json pins them, and the Makefile's folder named for them."""
    makefile = (TEMPLATE / "Makefile").read_text()
    versions = {binary.name: binary.version for binary in toolchain.BINARIES}

    assert re.fullmatch(r"v(\d+\.\d+)\.\d+", toolchain.KUBERNETES).group(1) == ANSWERS["kubernetes_version"]
    assert versions["mpi-operator"] == ANSWERS["_mpi_operator_version"]
    assert versions["kueue"] == "v" + ANSWERS["_kueue_version"]
    built = re.search(r"^CONTROL_PLANE_VERSION := (\S+)$", makefile, re.MULTILINE).group(1)
    assert built == toolchain.KUBERNETES == versions["kube-apiserver"]


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
