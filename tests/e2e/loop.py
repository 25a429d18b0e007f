"""The GitOps loop, run for real on loopback: a baked project served by a git server, Flux's controllers reconciling
it into the local control plane, the charts from loopback chart servers, kwok nodes from the environment's
ClusterConfig. `Loop.run()` does every step and records how long each took; `Loop.stop()` ends every process.

Steps (README.md says what each stands in for):
 1. the project: E2E_PROJECT (a baked, committed repository) or a bake of the template's working tree;
 2. a clone of it with one stand-in commit (sources.point_sources_at_loopback), served by GitServer;
 3. the control plane (etcd, kube-apiserver, kube-scheduler, kwok; kube-controller-manager), Flux's CRDs;
 4. kwok nodes for every node group at maxSize (live/simulate.py's node_docs), the cluster-settings ConfigMap
    (scripts/cluster-settings --print, applied with kubectl as the tool applies it);
 5. source-controller, kustomize-controller, helm-controller, then the bootstrap objects;
 6. the MPI operator process, once Flux has installed its CRD (it exits at start without it);
 7. waits: every Kustomization and HelmRelease Ready.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client.rest import ApiException

from eks_gpu_gitops.live import simulate
from eks_gpu_gitops.live.control_plane import CORE, ControlPlane, find_binary
from eks_gpu_gitops.render import repository as render

from . import flux, kwok_stages, sources
from .git_server import GitServer
from .kueue_process import KueueProcess

TEMPLATE = sources.TEMPLATE
# The values `scripts/cluster-settings` is given: the shapes of an AWS subnet and security group id.
SUBNET_ID = "subnet-0123456789abcdef0"
SECURITY_GROUP_ID = "sg-0123456789abcdef0"
SYNC_INTERVAL = "10s"
KCM = "kube-controller-manager"
MPI_OPERATOR_RESTARTS = 20


def _bake(work: Path) -> Path:
    """The template's working tree (the files git would commit) baked with its defaults."""
    from cookiecutter.main import cookiecutter

    sys.path.insert(0, str(TEMPLATE / "tools"))
    from committed import committed_copy

    copy = committed_copy(TEMPLATE, work / "template")
    return Path(cookiecutter(str(copy), no_input=True, output_dir=str(work / "bake")))


def _run(argv: list[str], **options) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, **options)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _flux_kinds() -> dict[str, tuple[str, str, str]]:
    return {
        "GitRepository": ("source.toolkit.fluxcd.io", "v1", "gitrepositories"),
        "OCIRepository": ("source.toolkit.fluxcd.io", "v1", "ocirepositories"),
        "HelmRepository": ("source.toolkit.fluxcd.io", "v1", "helmrepositories"),
        "HelmChart": ("source.toolkit.fluxcd.io", "v1", "helmcharts"),
        "Kustomization": ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"),
        "HelmRelease": ("helm.toolkit.fluxcd.io", "v2", "helmreleases"),
    }


def ready_condition(obj: dict) -> dict | None:
    """The Ready condition of a Flux object when it is about the object's current generation."""
    status = obj.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            if status.get("observedGeneration", -1) != obj["metadata"].get("generation"):
                return None
            return condition
    return None


@dataclass
class Loop:
    env: str = "prod"
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gitops-e2e-")))
    timings: dict[str, float] = field(default_factory=dict)
    ready_at: dict[str, float] = field(default_factory=dict)  # "Kind/name" -> seconds after bootstrap
    # "Kind/name" -> [(seconds after bootstrap, Ready status, reason)], one entry per change seen (polled each second)
    history: dict[str, list] = field(default_factory=dict)
    project: Path | None = None
    clone: Path | None = None
    plane: ControlPlane | None = None
    cluster: simulate.Cluster | None = None
    git_server: GitServer | None = None
    chart_servers: sources.ChartServers | None = None
    controllers: flux.FluxControllers | None = None
    kueue: KueueProcess | None = None
    node_groups: list[dict] = field(default_factory=list)  # name, instanceType, nodes (simulate.node_docs)
    bootstrapped: float = 0.0
    mpi_operator_restarts: int = 0
    webhook_retries: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # --- steps --------------------------------------------------------------------------------------------------

    def _timed(self, name: str, step, *args):
        started = time.monotonic()
        result = step(*args)
        self.timings[name] = round(time.monotonic() - started, 1)
        return result

    def run(self, timeout: float = 600) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self._timed("project", self.make_project)
        self._timed("charts", self.start_chart_servers)
        self._timed("git server", self.serve_project)
        self._timed("control plane", self.start_control_plane)
        self._timed("flux CRDs", self.install_flux_crds)
        self._timed("nodes", self.make_nodes)
        self._timed("cluster-settings", self.write_cluster_settings)
        self._timed("flux controllers", self.start_flux)
        self._timed("bootstrap", self.bootstrap)
        self._timed("reconcile", self.wait_all_ready, timeout)

    def make_project(self) -> None:
        given = os.environ.get("E2E_PROJECT")
        self.project = Path(given).resolve() if given else _bake(self.work)
        self.clone = self.work / "clone"
        if (self.project / ".git").exists():
            subprocess.run(["git", "clone", "--quiet", str(self.project), str(self.clone)], check=True)
        else:
            shutil.copytree(self.project, self.clone)
            sources.git(self.clone, "init", "--quiet", "--initial-branch=main")
            sources.git(self.clone, "add", "-A")
            sources.git(self.clone, "commit", "--quiet", "-m", "baked")

    @property
    def branch(self) -> str:
        return sources.git(self.clone, "rev-parse", "--abbrev-ref", "HEAD").strip()

    def start_chart_servers(self) -> None:
        self.chart_servers = sources.ChartServers(self.work / "charts").start()

    def serve_project(self) -> None:
        self.git_server = GitServer(self.work / "git", self.work / "git-server.log").start()
        mpi = sources.mpi_operator_repository(self.work / "upstream")
        self.git_server.add_bare("mpi-operator.git", mpi)
        urls = {**self.chart_servers.urls, ("GitRepository", "mpi-operator"): self.git_server.url("mpi-operator.git")}
        sources.point_sources_at_loopback(self.clone, urls)
        self.git_server.add_bare("project.git", self.clone)
        verb = "set-url" if "origin" in sources.git(self.clone, "remote").split() else "add"
        sources.git(self.clone, "remote", verb, "origin", self.git_server.url("project.git"))

    def start_control_plane(self) -> None:
        self.plane = ControlPlane(components=(*CORE, "kube-scheduler", "kwok"), folder=self.work / "plane")
        self.plane.folder.mkdir(parents=True, exist_ok=True)
        kwok_folder = self.work / "kwok"
        kwok_stages.write_configuration(kwok_folder)
        with kwok_stages.kwok_workdir(kwok_folder):
            self.plane.start()
        self._start_controller_manager()
        self.cluster = simulate.Cluster(self.plane)

    def _start_controller_manager(self) -> None:
        """kube-controller-manager: the ControlPlane component when the tool has it, else started here with the
        plane's service-account key and CA (Deployments, DaemonSets, Jobs, namespace deletion, garbage collection
        and the default ServiceAccounts need it)."""
        try:
            self.plane.add(KCM)
            return
        except KeyError:
            pass
        pki = self.plane.folder / "pki"
        self.plane._spawn(
            KCM,
            [
                find_binary(KCM),
                f"--kubeconfig={self.plane.kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'apiserver.crt'}",
                "--use-service-account-credentials=false",
            ],
        )
        self.notes.append("kube-controller-manager started by the harness (not yet a ControlPlane component)")

    def install_flux_crds(self) -> None:
        self.cluster.install_crds(flux.crd_documents(sources.charts.go_module_dir))

    def make_nodes(self) -> None:
        (environment,) = render.render_repository(self.clone, [self.env])
        nodes, groups = simulate.node_docs(environment.cluster_config.doc)
        self.node_groups = groups
        simulate._make_nodes(self.cluster, nodes, 120)

    def kubectl_environment(self) -> dict:
        return {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)}

    def write_cluster_settings(self) -> None:
        """`scripts/cluster-settings --env ENV --subnet-id ... --security-group-id ... --print`, applied as the tool
        applies it (kubectl apply --server-side, field manager gitops-cluster-settings): without --print the tool
        first checks the context's server against `aws eks describe-cluster`, which has no answer here.
        E2E_SKIP_CLUSTER_SETTINGS=1 leaves it out, to show what the run says when a user forgets it."""
        if os.environ.get("E2E_SKIP_CLUSTER_SETTINGS") == "1":
            self.notes.append("cluster-settings not written (E2E_SKIP_CLUSTER_SETTINGS=1)")
            return
        tool = os.environ.get("EKS_GPU_GITOPS") or str(Path(sys.executable).with_name("eks-gpu-gitops"))
        printed = _run(
            [
                str(self.clone / "scripts" / "cluster-settings"),
                "--env",
                self.env,
                "--subnet-id",
                SUBNET_ID,
                "--security-group-id",
                SECURITY_GROUP_ID,
                "--print",
            ],
            cwd=self.clone,
            env={**os.environ, "EKS_GPU_GITOPS": tool},
        )
        _run(
            ["kubectl", "apply", "--server-side", "--field-manager", "gitops-cluster-settings", "-f", "-"],
            input=printed,
            env=self.kubectl_environment(),
        )

    def start_flux(self) -> None:
        self.controllers = flux.FluxControllers(self.plane.kubeconfig, self.work / "flux")
        self.controllers.folder.mkdir(parents=True, exist_ok=True)
        self.controllers.start()

    def bootstrap(self) -> None:
        url = self.git_server.url("project.git")
        for doc in flux.bootstrap_documents(url, self.branch, self.env, SYNC_INTERVAL):
            try:
                self.cluster.create(doc)
            except ApiException as error:
                if error.status != 409:  # cluster-settings made the namespace
                    raise
        self.bootstrapped = time.monotonic()

    # --- reading the cluster --------------------------------------------------------------------------------------

    def list(self, kind: str) -> list[dict]:
        group, version, plural = _flux_kinds()[kind]
        custom = self.cluster.client.CustomObjectsApi(self.cluster.api)
        return custom.list_cluster_custom_object(group, version, plural)["items"]

    def flux_summary(self) -> str:
        lines = []
        for kind in _flux_kinds():
            for obj in self.list(kind):
                condition = next(
                    (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
                )
                lines.append(
                    f"{kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}: "
                    f"Ready={condition.get('status', '?')} {condition.get('reason', '')}: "
                    f"{' '.join(str(condition.get('message', '')).split())[:400]}"
                )
        return "\n".join(lines)

    def workload_summary(self) -> list[str]:
        """The pods outside the system namespaces and Kueue's Workloads, for the run's report."""
        lines = []
        for pod in self.cluster.core.list_pod_for_all_namespaces().items:
            if pod.metadata.namespace in ("kube-system", "kueue-system", "mpi-operator"):
                continue
            waiting = next(
                (c.message for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status != "True"), ""
            )
            lines.append(
                f"Pod {pod.metadata.namespace}/{pod.metadata.name}: {pod.status.phase} on {pod.spec.node_name or '-'}"
                + (f" ({' '.join(waiting.split())[:300]})" if waiting else "")
            )
        custom = self.cluster.client.CustomObjectsApi(self.cluster.api)
        try:
            workloads = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]
        except ApiException:
            workloads = []
        for workload in workloads:
            conditions = {c["type"]: c["status"] for c in (workload.get("status") or {}).get("conditions") or []}
            lines.append(f"Workload {workload['metadata']['namespace']}/{workload['metadata']['name']}: {conditions}")
        return lines

    def _mpi_operator_when_crd(self) -> None:
        """The MPI operator once its CRD is served (it exits at start without it), started again when it exits:
        mpi-operator v0.8.2 serves its health check on the fixed port 8080 (cmd/mpi-operator/app/server.go,
        healthCheckPort), so another plane on this machine (a `scripts/simulate`, a test) makes it exit at start."""
        process = self.plane.processes.get("mpi-operator")
        if process is not None:
            if process.poll() is not None and self.mpi_operator_restarts < MPI_OPERATOR_RESTARTS:
                self.mpi_operator_restarts += 1
                self.notes.append(f"mpi-operator exited ({self.plane.log_tail('mpi-operator', 1)}): started again")
                self.plane.add("mpi-operator")
            return
        try:
            crd = self.cluster.extensions.read_custom_resource_definition("mpijobs.kubeflow.org")
        except ApiException:
            return
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            self.plane.add("mpi-operator")
            self.timings["mpi-operator started after bootstrap"] = round(time.monotonic() - self.bootstrapped, 1)

    def _record(self, key: str, obj: dict) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        condition = next((c for c in conditions if c.get("type") == "Ready"), {})
        seen = (condition.get("status", "-"), condition.get("reason", "-"))
        changes = self.history.setdefault(key, [])
        if not changes or tuple(changes[-1][1:]) != seen:
            changes.append((round(time.monotonic() - self.bootstrapped, 1), *seen))

    def _bind_claims(self) -> None:
        """No FSx CSI driver provisions here: each Pending claim gets a stub PersistentVolume made for it (claimRef
        set, as a static PV pre-bound by an administrator), and kube-controller-manager's PV controller binds the two
        (k8s.io/kubernetes v1.34.4 pkg/controller/volume/persistentvolume, syncUnboundClaim: a volume whose claimRef
        names the claim is chosen first). `scripts/simulate` binds by hand instead (live/simulate.py, _bind_stub):
        it runs no PV controller, and here binding by hand races the real one, which then marks the claim Lost."""
        volumes = {v.metadata.name for v in self.cluster.core.list_persistent_volume().items}
        for claim in self.cluster.core.list_persistent_volume_claim_for_all_namespaces().items:
            name = f"stub-{claim.metadata.namespace}-{claim.metadata.name}"
            if claim.status.phase != "Pending" or claim.spec.volume_name or name in volumes:
                continue
            self.cluster.core.create_persistent_volume(
                {
                    "metadata": {"name": name},
                    "spec": {
                        "capacity": {"storage": (claim.spec.resources.requests or {}).get("storage", "1Gi")},
                        "accessModes": claim.spec.access_modes or ["ReadWriteOnce"],
                        "storageClassName": claim.spec.storage_class_name or "",
                        "claimRef": {"namespace": claim.metadata.namespace, "name": claim.metadata.name},
                        "csi": {"driver": "stub.e2e.local", "volumeHandle": name},
                    },
                }
            )
            self.notes.append(
                f"PersistentVolumeClaim {claim.metadata.namespace}/{claim.metadata.name} is bound to the stub "
                f"PersistentVolume {name} (no FSx CSI driver here)"
            )

    def _kueue_when_installed(self) -> None:
        """Kueue's manager, once Flux has installed its chart (HelmRelease kueue Ready): its webhooks then answer."""
        if self.kueue is not None:
            return
        for release in self.list("HelmRelease"):
            condition = ready_condition(release)
            spec = release["spec"]
            name = spec.get("releaseName") or release["metadata"]["name"]
            if release["metadata"]["name"] == "kueue" and condition and condition.get("status") == "True":
                self.kueue = KueueProcess(
                    self.cluster.api,
                    self.plane.kubeconfig,
                    self.work / "kueue",
                    namespace=spec.get("targetNamespace") or release["metadata"]["namespace"],
                    fullname=name if "kueue" in name else f"{name}-kueue",
                )
                self.kueue.start()
                self.timings["kueue started after bootstrap"] = round(time.monotonic() - self.bootstrapped, 1)

    def _retry_webhook_failures(self) -> None:
        """Once Kueue's process answers, a Kustomization that failed calling its webhooks is reconciled again at once,
        as `flux reconcile kustomization NAME` does (annotation reconcile.fluxcd.io/requestedAt), instead of after its
        retryInterval (2m for mpi-operator). The chart registers the webhooks (mdeployment.kb.io mutates every
        Deployment) before the manager serves them: a pod's start on EKS, a process's start here."""
        if self.kueue is None:
            return
        custom = self.cluster.client.CustomObjectsApi(self.cluster.api)
        for obj in self.list("Kustomization"):
            # Not ready_condition: a failed reconcile leaves observedGeneration unset (-1).
            conditions = (obj.get("status") or {}).get("conditions") or []
            condition = next((c for c in conditions if c.get("type") == "Ready"), {})
            name = obj["metadata"]["name"]
            if condition.get("status") != "False" or "failed calling webhook" not in str(condition.get("message")):
                continue
            if time.monotonic() - self.webhook_retries.get(name, -60.0) < 10:
                continue
            self.webhook_retries[name] = time.monotonic()
            requested = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": str(time.time())}}}
            custom.patch_namespaced_custom_object(
                "kustomize.toolkit.fluxcd.io", "v1", obj["metadata"]["namespace"], "kustomizations", name, requested
            )
            self.notes.append(f"Kustomization {name} failed calling Kueue's webhook before Kueue ran: reconciled again")

    def wait_all_ready(self, timeout: float) -> None:
        """Until every Kustomization and HelmRelease is Ready (at least the three the layout names), or timeout;
        records when each turned Ready. Starts the MPI operator once its CRD is served."""
        expected = {"Kustomization/flux-system", "Kustomization/infrastructure", "Kustomization/training"}
        deadline = self.bootstrapped + timeout
        while time.monotonic() < deadline:
            self._mpi_operator_when_crd()
            self._kueue_when_installed()
            self._bind_claims()
            self._retry_webhook_failures()
            seen = set()
            for kind in ("Kustomization", "HelmRelease"):
                for obj in self.list(kind):
                    key = f"{kind}/{obj['metadata']['name']}"
                    seen.add(key)
                    self._record(key, obj)
                    condition = ready_condition(obj)
                    if condition and condition.get("status") == "True":
                        self.ready_at.setdefault(key, round(time.monotonic() - self.bootstrapped, 1))
            if expected <= seen and all(key in self.ready_at for key in seen):
                return
            time.sleep(1)

    # --- after the loop: what the tests do as a user would ----------------------------------------------------------

    def tend(self) -> None:
        """What the wait loop keeps doing while a test waits: the MPI operator restarted if it exited, stub volumes
        for new claims."""
        self._mpi_operator_when_crd()
        self._bind_claims()

    def wait_for(self, what, timeout: float = 90, every: float = 1.0):
        """what() until it returns something truthy (returned), or None at timeout; tends the loop meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            self.tend()
            found = what()
            if found or time.monotonic() > deadline:
                return found
            time.sleep(every)

    def tool_environment(self) -> dict:
        """The environment a user's shell has: KUBECONFIG of the local plane; the tool the harness runs (the
        clone has no .venv: EKS_GPU_GITOPS names the installed one, as scripts/tool reads it)."""
        tool = os.environ.get("EKS_GPU_GITOPS") or str(Path(sys.executable).with_name("eks-gpu-gitops"))
        return {**self.kubectl_environment(), "EKS_GPU_GITOPS": tool, "NO_COLOR": "1"}

    def script(self, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """scripts/<name> ARGS run in the working clone, as a user runs it."""
        return subprocess.run(
            [str(self.clone / "scripts" / name), *args],
            cwd=self.clone,
            env=self.tool_environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def merge(self, message: str) -> str:
        """Commit the clone's changes and push them to the loopback server (a pull request merged); then ask Flux to
        fetch now, as `flux reconcile source git flux-system` does (annotation reconcile.fluxcd.io/requestedAt,
        fluxcd/pkg/apis/meta annotations.go), instead of waiting for the 10 s interval. Returns the commit."""
        sources.git(self.clone, "add", "-A")
        sources.git(self.clone, "commit", "--quiet", "-m", message)
        return self.push()

    def push(self) -> str:
        """Push the clone's branch to the loopback server and ask Flux to fetch now; returns the commit pushed."""
        sources.git(self.clone, "push", "--quiet", "origin", f"HEAD:{self.branch}")
        custom = self.cluster.client.CustomObjectsApi(self.cluster.api)
        requested = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": str(time.time())}}}
        custom.patch_namespaced_custom_object(
            "source.toolkit.fluxcd.io", "v1", "flux-system", "gitrepositories", "flux-system", requested
        )
        return sources.git(self.clone, "rev-parse", "HEAD").strip()

    def applied(self, name: str, commit: str) -> dict | None:
        """The Kustomization `name` once it has applied `commit` and is Ready at its generation, else None."""
        for obj in self.list("Kustomization"):
            if obj["metadata"]["name"] != name:
                continue
            revision = (obj.get("status") or {}).get("lastAppliedRevision") or ""
            ready = ready_condition(obj) or {}
            if revision.endswith(f":{commit}") and ready.get("status") == "True":
                return obj
        return None

    # --- the end --------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
        if self.kueue is not None:
            self.kueue.stop()
        if self.plane is not None:
            logs = self.work / "plane-logs"
            logs.mkdir(exist_ok=True)
            for log in self.plane.folder.glob("*.log"):
                shutil.copy(log, logs / log.name)
            self.plane.stop()  # removes its folder: the logs were copied first
        if self.chart_servers is not None:
            self.chart_servers.stop()
        if self.git_server is not None:
            self.git_server.close()
