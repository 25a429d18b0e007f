"""Flux's controllers as local processes, its CRDs, and the objects `flux bootstrap git` makes.

Versions: Flux v2.9.5's controllers, source-controller v1.9.5, kustomize-controller v1.9.5, helm-controller v1.6.4
(fluxcd/flux2 v2.9.5, manifests/bases/*/kustomization.yaml). Flags read in each controller's main.go at that
version and in the fluxcd/pkg modules they bind (runtime v0.110.3; artifact v0.18.x config/flags.go):

- --storage-path, --storage-addr, --storage-adv-addr (source-controller, fluxcd/pkg/artifact config): the artifact
  server listens on a free loopback port and advertises it, so the other two fetch artifacts from 127.0.0.1.
- --metrics-addr, --health-addr (all three; defaults :8080 and :9440, which would collide): free loopback ports.
- --enable-leader-election defaults to false (runtime/leaderelection); --watch-all-namespaces defaults to true
  (runtime/controller/watch.go): given explicitly.
- --requeue-dependency (all three, default 30s): how often a Kustomization or HelmRelease whose dependsOn is not
  Ready is looked at again. 5s here, so the wait after `infrastructure` turns Ready is seconds, not half a minute.
- The kubeconfig: controller-runtime's GetConfigOrDie reads $KUBECONFIG (the admin's), and RUNTIME_NAMESPACE is
  flux-system, as in the controllers' Deployments.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from eks_gpu_gitops.live.control_plane import find_binary

NAMESPACE = "flux-system"
# (Go module, version) of each controller of Flux v2.9.5; their CRDs are read from the module's config/crd/bases.
CONTROLLERS = {
    "source-controller": ("github.com/fluxcd/source-controller", "v1.9.5"),
    "kustomize-controller": ("github.com/fluxcd/kustomize-controller", "v1.9.5"),
    "helm-controller": ("github.com/fluxcd/helm-controller", "v1.6.4"),
}
REQUEUE_DEPENDENCY = "5s"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def crd_documents(module_dir) -> list[dict]:
    """The CRDs each controller serves, from its module source at the pinned version (config/crd/bases), which is
    what the release's install manifests are built from. module_dir(module, version) gives the module's folder."""
    docs = []
    for module, version in CONTROLLERS.values():
        folder = module_dir(module, version)
        if folder is None:
            raise RuntimeError(f"{module}@{version} is not in the Go module cache and could not be downloaded")
        for path in sorted((Path(folder) / "config" / "crd" / "bases").glob("*.yaml")):
            docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


@dataclass
class FluxControllers:
    kubeconfig: Path
    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    health: dict[str, int] = field(default_factory=dict)
    storage_address: str = ""

    def argv(self, name: str, binary: str) -> list[str]:
        metrics, health = free_port(), free_port()
        self.health[name] = health
        common = [
            f"--metrics-addr=127.0.0.1:{metrics}",
            f"--health-addr=127.0.0.1:{health}",
            "--enable-leader-election=false",
            "--watch-all-namespaces=true",
            "--log-level=info",
        ]
        if name == "source-controller":
            self.storage_address = f"127.0.0.1:{free_port()}"
            storage = self.folder / "artifacts"
            storage.mkdir(parents=True, exist_ok=True)
            common += [
                f"--storage-path={storage}",
                f"--storage-addr={self.storage_address}",
                f"--storage-adv-addr={self.storage_address}",
            ]
        return [binary, *common, f"--requeue-dependency={REQUEUE_DEPENDENCY}"]

    def start(self) -> None:
        environment = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": NAMESPACE}
        for name in CONTROLLERS:
            argv = self.argv(name, find_binary(name))
            with open(self.folder / f"{name}.log", "wb") as log:
                self.processes[name] = subprocess.Popen(
                    argv, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
                )
        for name in CONTROLLERS:
            self._wait_healthy(name)

    def _wait_healthy(self, name: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health[name]}/readyz"
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"{name} exited at start; see {self.folder / (name + '.log')}")
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{name} not healthy after {timeout:.0f} s; see {self.folder / (name + '.log')}")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def bootstrap_documents(url: str, branch: str, env: str, interval: str) -> list[dict]:
    """What `flux bootstrap git --url=URL --branch=BRANCH --path=clusters/ENV` applies besides the controllers:
    fluxcd/flux2 v2.9.5 pkg/manifestgen/sync/sync.go (Generate) writes GitRepository flux-system (spec.url,
    ref.branch, interval from --interval, default 1m; secretRef flux-system) and Kustomization flux-system
    (interval 10m, path ./clusters/ENV, prune true, sourceRef the GitRepository), both in namespace flux-system,
    into clusters/ENV/flux-system/gotk-sync.yaml. Differences here, all stand-ins of the harness: both intervals are
    `interval` (seconds, for a test); no secretRef, as the loopback server asks for no credentials; the objects
    are applied, not committed (the controllers' Deployments of gotk-components.yaml are not applied either: the
    local processes stand in for them)."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": NAMESPACE, "namespace": NAMESPACE},
            "spec": {"interval": interval, "url": url, "ref": {"branch": branch}},
        },
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": NAMESPACE, "namespace": NAMESPACE},
            "spec": {
                "interval": interval,
                "path": f"./clusters/{env}",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": NAMESPACE},
            },
        },
    ]
