"""Everything the baked project's Flux sources fetch, served on loopback, and the one commit of the harness's copy
that points those sources at it.

- The Helm charts: tool/tests/chart_repository.py (shared with the tool's tests, imported from there) serves the
  FSx CSI driver's chart (upstream's, re-versioned to the template's pin) and a stand-in for Cluster Autoscaler's from
  an HTTP Helm repository, and Kueue's upstream chart (sigs.k8s.io/kueue@v0.19.2, charts/kueue) from an OCI registry.
- The MPI operator's kustomize manifests: the GitRepository mpi-operator points at github.com/kubeflow/mpi-operator
  tag v0.8.2; here a loopback git repository holds the manifests/ folder of the Go module zip
  github.com/kubeflow/mpi-operator@v0.8.2 (the same files the tag holds) under the same tag.

The generated repository never sees any of this: the harness clones it and makes one commit ("e2e stand-in")
that changes the sources' URLs (and adds `insecure: true` to the OCIRepository, as the registry speaks plain HTTP).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

TEMPLATE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TEMPLATE / "tool" / "tests"))
import chart_repository as charts  # noqa: E402

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "e2e",
    "GIT_AUTHOR_EMAIL": "e2e@localhost",
    "GIT_COMMITTER_NAME": "e2e",
    "GIT_COMMITTER_EMAIL": "e2e@localhost",
}
MPI_OPERATOR = ("github.com/kubeflow/mpi-operator", "v0.8.2")
STAND_IN_MESSAGE = "e2e stand-in: Flux sources on loopback (the harness's copy only)"

# The Cluster Autoscaler stand-in's ServiceAccount: the template's values ask the chart to make it
# (rbac.serviceAccount.create), and without it the API server refuses the Deployment's pods.
AUTOSCALER_SERVICE_ACCOUNT = """{{- if .Values.rbac.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Values.rbac.serviceAccount.name }}
{{- end }}
"""


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=folder, capture_output=True, text=True, env={**os.environ, **GIT_IDENTITY}
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {folder}: {done.stderr.strip()}")
    return done.stdout


def served_charts(work: Path) -> Path:
    """work/served: the template's HTTP charts packed (chart_repository.template_charts' two, the autoscaler stand-in
    with its ServiceAccount template added)."""
    served = work / "served"
    charts.package_chart(charts.fsx_chart(work / "fsx"), served)
    templates = {"deployment.yaml": charts.AUTOSCALER_DEPLOYMENT, "serviceaccount.yaml": AUTOSCALER_SERVICE_ACCOUNT}
    values = {**charts.AUTOSCALER_VALUES, "rbac": {"serviceAccount": {"create": True, "name": "cluster-autoscaler"}}}
    charts.package_chart(charts.make_chart(work / "src", "cluster-autoscaler", "9.59.0", templates, values), served)
    return served


def mpi_operator_repository(work: Path) -> Path:
    """A git repository with the MPI operator's manifests/ at v0.8.2 (from the Go module zip), tagged v0.8.2."""
    module_dir = charts.go_module_dir(*MPI_OPERATOR)
    if module_dir is None:
        raise RuntimeError(f"{MPI_OPERATOR[0]}@{MPI_OPERATOR[1]} could not be had from the Go module proxy")
    target = work / "mpi-operator"
    shutil.copytree(module_dir / "manifests", target / "manifests")
    subprocess.run(["chmod", "-R", "u+w", str(target)], check=True)
    git(target, "init", "--quiet", "--initial-branch=master")
    git(target, "add", "-A")
    git(target, "commit", "--quiet", "-m", f"manifests of {MPI_OPERATOR[0]}@{MPI_OPERATOR[1]}")
    git(target, "tag", MPI_OPERATOR[1])
    return target


@dataclass
class ChartServers:
    """The HTTP Helm repository and the OCI registry with Kueue's chart; `urls` maps a source (kind, name) of the
    template to its loopback URL."""

    work: Path
    repository: charts.ChartRepository | None = None
    registry: charts.OciRegistry | None = None
    urls: dict[tuple[str, str], str] = field(default_factory=dict)

    def start(self) -> ChartServers:
        self.repository = charts.ChartRepository(served_charts(self.work)).start()
        binary = charts.oci_registry_binary()
        if binary is None:
            raise RuntimeError("the OCI registry (go-containerregistry cmd/registry) could not be built")
        self.registry = charts.OciRegistry(binary).start()
        kueue = charts.real_chart("kueue")
        if kueue is None:
            raise RuntimeError("Kueue's chart (sigs.k8s.io/kueue@v0.19.2) could not be had from the Go module proxy")
        pushed = charts.push_chart(charts.package_chart(kueue, self.work / "kueue"), self.registry.url, "kueue/charts")
        self.urls = {
            ("HelmRepository", "aws-fsx-csi-driver"): self.repository.url,
            ("HelmRepository", "autoscaler"): self.repository.url,
            ("OCIRepository", "kueue"): pushed.url,
        }
        return self

    def stop(self) -> None:
        if self.repository is not None:
            self.repository.close()
        if self.registry is not None:
            self.registry.close()


def point_sources_at_loopback(clone: Path, urls: dict[tuple[str, str], str]) -> list[str]:
    """In the harness's clone of the project: every Flux source in overlays/ whose (kind, name) is in `urls` gets
    that URL (an OCIRepository also `insecure: true`), committed as one commit. Returns the files changed; raises
    when a source named in `urls` is not found, so a renamed source fails here and not as a time-out later."""
    found, changed = set(), []
    for path in sorted((clone / "overlays").rglob("*.yaml")):
        text = path.read_text()
        if "toolkit.fluxcd.io" not in text:
            continue
        new = text
        for doc in yaml.safe_load_all(text):
            if not isinstance(doc, dict):
                continue
            key = (doc.get("kind"), (doc.get("metadata") or {}).get("name"))
            old = (doc.get("spec") or {}).get("url")
            if key not in urls or not old:
                continue
            found.add(key)
            line = f"  url: {old}\n"
            if line not in new:
                raise RuntimeError(f"{path}: {key[0]} {key[1]}'s url is not written as `url: {old}` under spec")
            replacement = f"  url: {urls[key]}\n" + ("  insecure: true\n" if key[0] == "OCIRepository" else "")
            new = new.replace(line, replacement, 1)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(clone)))
    missing = set(urls) - found
    if missing:
        raise RuntimeError(f"sources not found in {clone}/overlays: {sorted(missing)}")
    mirror = urls.get(("GitRepository", "mpi-operator"))
    if mirror:
        changed.append(_declare_crd_provider(clone, mirror, "kubeflow.org/MPIJob"))
    git(clone, "add", *changed)
    git(clone, "commit", "--quiet", "-m", STAND_IN_MESSAGE)
    return changed


def _declare_crd_provider(clone: Path, url: str, kind: str) -> str:
    """platform.yaml's crd_providers gains the loopback mirror (what a user pointing a source at a mirror writes):
    validate knows the MPI operator's CRD by its GitHub URL only (rules/ordering.py REMOTE_PROVIDERS), so without
    it `scripts/scale`, `scripts/new-job` and `scripts/validate` refuse the clone ("crd-not-installed")."""
    path = clone / "platform.yaml"
    text = path.read_text() if path.exists() else ""
    platform = yaml.safe_load(text) or {}
    entry = {"url": url, "provides": [kind]}
    if "crd_providers" in platform:
        platform["crd_providers"] = [*(platform["crd_providers"] or []), entry]
        path.write_text(yaml.safe_dump(platform, sort_keys=False))
    else:
        block = yaml.safe_dump({"crd_providers": [entry]}, sort_keys=False)
        path.write_text(text + "\n# e2e stand-in: the MPI operator's manifests come from a loopback mirror.\n" + block)
    return "platform.yaml"
