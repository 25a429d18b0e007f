"""The local control plane is built at the versions the template pins for the cluster it stands in for."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_control_plane_matches_the_default_cluster_and_the_mpi_operator_pin():
    answers = json.loads((ROOT / "cookiecutter.json").read_text())
    script = (ROOT / "tools" / "build-control-plane.sh").read_text()
    go_mod = (ROOT / "tools" / "control-plane" / "kubernetes" / "go.mod").read_text()
    makefile = (ROOT / "Makefile").read_text()

    kubernetes = re.search(r"^\s*k8s\.io/kubernetes v(\d+\.\d+)\.\d+$", go_mod, re.MULTILINE).group(1)
    assert kubernetes == answers["kubernetes_version"]
    assert re.search(r"^MPI_OPERATOR_VERSION=(\S+)$", script, re.MULTILINE).group(1) == answers["_mpi_operator_version"]
    built = re.search(r"^CONTROL_PLANE_VERSION := (\S+)$", makefile, re.MULTILINE).group(1)
    assert built == "v" + re.search(r"k8s\.io/kubernetes v(\S+)$", go_mod, re.MULTILINE).group(1)
