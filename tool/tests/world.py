"""A rendered environment for rule tests: tests/fixtures/environment.yaml, loaded into the same
Scope the validator builds, with handles on the objects cases change."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import yaml

from eks_gpu_gitops.model import FluxKustomization, HelmReleaseRender, Manifest, Scope
from eks_gpu_gitops.render import post_build
from eks_gpu_gitops.validate.load import kubernetes_version_of

FIXTURE = Path(__file__).parent / "fixtures" / "environment.yaml"


@lru_cache(maxsize=1)
def _fixture() -> dict:
    return yaml.safe_load(FIXTURE.read_text())


class World:
    def __init__(self):
        data = copy.deepcopy(_fixture())
        self.env: str = data["env"]
        self.cluster: dict | None = data["cluster"]
        self.kustomizations: list[dict] = data["kustomizations"]
        self.complete = True  # the objects are the whole environment
        self.flux = True  # the Flux entry points are known
        self.unrendered: set[str] = set()
        # HelmRelease name -> what its render says: {"error": ...}, {"note": why not rendered}, or {"objects": [...]}.
        self.releases: dict[str, dict] = {}

    # --- handles ------------------------------------------------------------------------
    def kustomization(self, name: str) -> dict:
        return next(k["manifest"] for k in self.kustomizations if k["manifest"]["metadata"]["name"] == name)

    def objects(self, kustomization: str) -> list[dict]:
        return next(k["objects"] for k in self.kustomizations if k["manifest"]["metadata"]["name"] == kustomization)

    def find(self, kind: str, name: str | None = None) -> dict:
        found = [
            o
            for k in self.kustomizations
            for o in k["objects"]
            if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
        ]
        assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
        return found[0]

    def add(self, kustomization: str, *docs: dict) -> None:
        self.objects(kustomization).extend(copy.deepcopy(d) for d in docs)

    def remove(self, kind: str, name: str | None = None) -> dict:
        doc = self.find(kind, name)
        for k in self.kustomizations:
            k["objects"] = [o for o in k["objects"] if o is not doc]
        return doc

    def move(self, kind: str, to: str) -> None:
        self.add(to, self.remove(kind))

    @property
    def gpu_group(self) -> dict:
        return next(g for g in self.cluster["managedNodeGroups"] if g["name"] == "gpu")

    @property
    def mpijob(self) -> dict:
        return self.find("MPIJob")

    def replica(self, role: str) -> dict:
        return self.mpijob["spec"]["mpiReplicaSpecs"][role]

    def pod(self, role: str) -> dict:
        return self.replica(role)["template"]["spec"]

    def container(self, role: str) -> dict:
        return self.pod(role)["containers"][0]

    @property
    def worker_resources(self) -> dict:
        return self.container("Worker")["resources"]

    @property
    def launcher_command(self) -> list:
        """mpirun and its options (the program and its flags are the container's args)."""
        return self.container("Launcher")["command"]

    @property
    def launcher_args(self) -> list:
        return self.container("Launcher")["args"]

    def remove_launcher_option(self, option: str, operands: int = 1) -> None:
        at = self.launcher_command.index(option)
        del self.launcher_command[at : at + 1 + operands]

    @property
    def storage_class(self) -> dict:
        return self.find("StorageClass")

    @property
    def claim(self) -> dict:
        return self.find("PersistentVolumeClaim")

    def daemonset(self, marker: str) -> dict:
        return next(
            o
            for k in self.kustomizations
            for o in k["objects"]
            if o["kind"] == "DaemonSet" and marker in o["metadata"]["name"]
        )

    # --- what the validator sees --------------------------------------------------------
    def scope(self) -> Scope:
        kustomizations, objects = [], []
        for entry in self.kustomizations:
            name = entry["manifest"]["metadata"]["name"]
            spec = entry["manifest"]["spec"]
            kustomization = FluxKustomization(
                manifest=Manifest(entry["manifest"], f"clusters/{self.env}/{name}.yaml", self.env),
                path=str(spec.get("path", "")).removeprefix("./"),
                depends_on=[d["name"] for d in spec.get("dependsOn", [])],
                objects=[]
                if name in self.unrendered
                else [Manifest(o, spec["path"].removeprefix("./"), self.env, name) for o in entry["objects"]],
                rendered=name not in self.unrendered,
            )
            kustomizations.append(kustomization)
        post_build.substitute_environment(kustomizations)  # as render_repository does
        for kustomization in kustomizations:
            objects += [kustomization.manifest, *kustomization.objects]
        cluster = Manifest(self.cluster, f"overlays/{self.env}/eksctl", self.env, "eksctl") if self.cluster else None
        releases = []
        for manifest in objects:
            rendered = self.releases.get(manifest.name) if manifest.kind == "HelmRelease" else None
            if rendered is not None:
                installed = [Manifest(o, manifest.file, self.env, manifest.name) for o in rendered.get("objects", [])]
                error, note = rendered.get("error", ""), rendered.get("note", "")
                releases.append(HelmReleaseRender(manifest, installed, error=error, note=note))
        objects += [m for release in releases for m in release.objects]
        scope = Scope(
            self.env, objects, cluster, kustomizations if self.flux else [], complete=self.complete, releases=releases
        )
        scope.kubernetes_version, _ = kubernetes_version_of(cluster, None)
        return scope
