"""scripts/simulate: the environment's MPIJobs admitted by Kueue from the environment's queue and placed by
kube-scheduler on kwok nodes made from its eksctl node groups, on the local control plane (skipped without its
binaries unless GITOPS_REQUIRE_CONTROL_PLANE)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import CONTROL_PLANE_REQUIRED, REPO, SCHEMA_DIR, broken_tool, need_binaries

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.facts.schemas import KUEUE
from eks_gpu_gitops.live import kueue
from eks_gpu_gitops.live.control_plane import ControlPlane, find_binary
from eks_gpu_gitops.live.simulate import node_docs
from eks_gpu_gitops.render.repository import render_repository

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kwok", "mpi-operator")
# Kueue's answer (admitted, queued, refused) ends a simulation at once; the limit only matters on a loaded machine,
# where Kueue can take more than simulate's default 60 s to write its first condition.
SLOW_MACHINE = ("--timeout", "180")


def run_simulate(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, **(env or {})}
    environment.pop("GITOPS_DEBUG", None)
    return subprocess.run(
        [str(cwd / "scripts" / "simulate"), *args], cwd=cwd, env=environment, capture_output=True, text=True
    )


def _skip(reason: str) -> None:
    if CONTROL_PLANE_REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def _kueue_crd_folder() -> Path | None:
    """config/components/crd/bases of the pinned Kueue module in the Go module cache, where its build put it."""
    go = shutil.which("go")
    if go is None:
        return None
    found = subprocess.run(
        [go, "mod", "download", "-json", f"sigs.k8s.io/kueue@v{KUEUE}"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    try:
        module = Path(json.loads(found.stdout)["Dir"])
    except (ValueError, KeyError):
        return None
    folder = module / "config" / "components" / "crd" / "bases"
    return folder if folder.is_dir() else None


@pytest.fixture(scope="session")
def kueue_env(tmp_path_factory) -> dict:
    """What scripts/simulate needs to run Kueue here: its binary (found as find_binary finds it) and a schema folder
    with all of Kueue's CRDs (the shared test copy lacks the Workload and MultiKueue ones: they come from the pinned
    Kueue module, from the Go module proxy)."""
    need_binaries(COMPONENTS)
    try:
        find_binary(kueue.BINARY)
    except InputError as error:
        _skip(f"Kueue's manager is not built: {error}")
    env = {}
    if SCHEMA_DIR is not None:
        folder = tmp_path_factory.mktemp("schemas")
        (folder / "crds").mkdir()
        for file in (SCHEMA_DIR / "crds").glob("*.yaml"):
            (folder / "crds" / file.name).symlink_to(file)
        if (SCHEMA_DIR / "eksctl").is_dir():
            (folder / "eksctl").symlink_to(SCHEMA_DIR / "eksctl")
        missing = [n for n in kueue.CRD_FILES if not (folder / "crds" / f"{kueue.GROUP}_{n}.yaml").is_file()]
        source = _kueue_crd_folder()
        if missing and source is None:
            _skip(f"Kueue CRDs {', '.join(missing)} not in {SCHEMA_DIR} nor in the Go module cache")
        for name in missing:
            (folder / "crds" / f"{kueue.GROUP}_{name}.yaml").symlink_to(source / f"{kueue.GROUP}_{name}.yaml")
        env["GITOPS_SCHEMA_DIR"] = str(folder)
    return env


def set_settings(repo: Path, old: str, new: str, count: int) -> None:
    settings = repo / "overlays" / "prod" / "settings.yaml"
    text = settings.read_text()
    assert text.count(old) == count, old
    settings.write_text(text.replace(old, new))


def prod_cluster_config() -> dict:
    (environment,) = render_repository(REPO, ["prod"])
    return environment.cluster_config.doc


def test_nodes_from_the_node_groups_at_max_size():
    nodes, groups = node_docs(prod_cluster_config())
    assert groups == [
        {"name": "system", "instanceType": "m6i.xlarge", "nodes": 3},
        {"name": "gpu", "instanceType": "p4d.24xlarge", "nodes": 2},
    ]
    gpu = [n for n in nodes if n["metadata"]["labels"]["alpha.eksctl.io/nodegroup-name"] == "gpu"]
    assert len(gpu) == 2
    node = gpu[0]
    assert node["status"]["allocatable"] == {
        "cpu": "96",
        "memory": "1152Gi",
        "pods": "110",
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "4",
    }
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    labels = node["metadata"]["labels"]
    assert labels["role"] == "gpu"
    assert labels["eks.amazonaws.com/nodegroup"] == "gpu"
    assert labels["topology.kubernetes.io/zone"] == "us-west-2a"
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    system = [n for n in nodes if n["metadata"]["labels"]["alpha.eksctl.io/nodegroup-name"] == "system"]
    assert "nvidia.com/gpu" not in system[0]["status"]["allocatable"]
    assert "taints" not in system[0]["spec"]


def test_node_group_with_an_unknown_instance_type_is_an_input_error():
    config = prod_cluster_config()
    config["managedNodeGroups"][1]["instanceType"] = "x9.huge"
    with pytest.raises(InputError, match="node group gpu: instance type 'x9.huge' not in the catalogue"):
        node_docs(config)


def test_unknown_environment_is_one_line(repo_copy):
    result = run_simulate("--env", "nope", cwd=repo_copy)
    assert result.returncode == 2
    assert result.stderr == "simulate: unknown environment 'nope'; known: dev, prod\n"
    assert result.stdout == ""


def test_prod_job_is_admitted_by_kueue_then_placed_launcher_on_system_workers_on_gpu(repo_copy, kueue_env):
    result = run_simulate("--env", "prod", *SLOW_MACHINE, "--format", "json", cwd=repo_copy, env=kueue_env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (job,) = report["jobs"]
    assert (job["namespace"], job["name"], job["scheduled"], job["state"]) == (
        "training",
        "horovod-train",
        True,
        "scheduled",
    )
    assert job["kueue"]["admitted"] is True and job["kueue"]["workload"].startswith("mpijob-horovod-train-")
    placed = sorted((p["role"], p["nodeGroup"]) for p in job["pods"])
    assert placed == [("launcher", "system"), ("worker", "gpu"), ("worker", "gpu")]
    assert all(p["node"] and not p["reason"] for p in job["pods"])
    notes = "\n".join(report["notes"])
    assert "PersistentVolumeClaim training/fsx-training is bound to a stub PersistentVolume" in notes
    assert "Kueue" not in notes
    assert report["fits"] is True
    lines = result.stderr.splitlines()
    assert "simulate: starting Kueue (release kueue in kueue-system)" in lines
    assert "simulate: applying training (9 objects)" in lines


def test_a_second_job_that_fits_the_quota_alone_waits_in_the_queue_and_simulate_passes(repo_copy, kueue_env):
    # The repro: a job new-job adds beside horovod-train (8 GPUs; the queue has 16, horovod-train uses
    # 16) was "NOT scheduled" and exit 1, because every job was applied and run at once.
    added = subprocess.run(
        [str(repo_copy / "scripts" / "new-job"), "second", "--env", "prod", "--workers", "1"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
    )
    assert added.returncode == 0, added.stderr
    result = run_simulate("--env", "prod", *SLOW_MACHINE, "--format", "json", cwd=repo_copy, env=kueue_env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    states = {j["name"]: j["state"] for j in report["jobs"]}
    assert sorted(states) == ["horovod-train", "second"]
    assert sorted(states.values()) == ["queued", "scheduled"], states
    (queued,) = [j for j in report["jobs"] if j["state"] == "queued"]
    (running,) = [j for j in report["jobs"] if j["state"] == "scheduled"]
    assert queued["pods"] == [] and queued["kueue"]["admitted"] is False
    assert queued["kueue"]["heldBy"] == [running["name"]]
    used = 16 if running["name"] == "horovod-train" else 8
    assert queued["kueue"]["quota"].startswith("ClusterQueue training's gpu flavor has ")
    assert f"gpu flavor has 16 nvidia.com/gpu, {used} in use by {running['name']}" in queued["kueue"]["quota"]
    assert "insufficient unused quota for nvidia.com/gpu in flavor gpu" in queued["kueue"]["message"]
    # Both were created in the same second: which one Kueue admits first may differ from run to run.
    text = run_simulate("--env", "prod", *SLOW_MACHINE, cwd=repo_copy, env=kueue_env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    (scheduled,) = [line for line in lines if line.startswith("MPIJob training/") and ": scheduled: " in line]
    (line,) = [line for line in lines if line.startswith("MPIJob training/") and ": queued: " in line]
    first = scheduled.split(":")[0].split("/")[1]
    assert line.split(": queued: ")[1].startswith("ClusterQueue training's gpu flavor has ")
    assert f"nvidia.com/gpu, {16 if first == 'horovod-train' else 8} in use by {first}" in line
    assert lines[lines.index(line) + 1].startswith("  Kueue: couldn't assign flavors to pod set worker: ")
    assert lines[-1].startswith("1/2 MPIJobs scheduled, 1 queued")


def test_a_job_above_the_whole_quota_is_not_scheduled_with_kueues_reason(repo_copy, kueue_env):
    set_settings(repo_copy, "nvidia.com/gpu: 8", "nvidia.com/gpu: 9", 2)  # 2 x 9 GPUs, the queue has 16
    result = run_simulate("--env", "prod", *SLOW_MACHINE, "--format", "json", cwd=repo_copy, env=kueue_env)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    (job,) = report["jobs"]
    assert (job["state"], job["pods"], job["kueue"]["queued"], report["fits"]) == ("NOT scheduled", [], False, False)
    assert "insufficient quota for nvidia.com/gpu in flavor gpu" in job["kueue"]["message"]
    assert "> maximum capacity (16)" in job["kueue"]["message"]
    text = run_simulate("--env", "prod", *SLOW_MACHINE, cwd=repo_copy, env=kueue_env).stdout.splitlines()
    assert "MPIJob training/horovod-train: NOT scheduled" in text
    assert any(line.startswith("  Kueue does not admit it: couldn't assign flavors to pod set worker") for line in text)


def test_workers_asking_more_gpus_than_a_node_has_stay_pending_with_the_schedulers_reason(repo_copy, kueue_env):
    set_settings(repo_copy, "nvidia.com/gpu: 8", "nvidia.com/gpu: 16", 2)  # requests and limits of workerResources
    set_settings(
        repo_copy, "nvidia.com/gpu\n              nominalQuota: 16", "nvidia.com/gpu\n              nominalQuota: 32", 1
    )
    result = run_simulate("--env", "prod", *SLOW_MACHINE, cwd=repo_copy, env=kueue_env)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "MPIJob training/horovod-train: NOT scheduled" in lines
    pending = [line for line in lines if ": Pending: " in line]
    assert [line.split(":")[0].strip() for line in pending] == ["horovod-train-worker-0", "horovod-train-worker-1"]
    assert all("Insufficient nvidia.com/gpu" in line for line in pending)
    # mpi-operator v0.8.2 creates the launcher Job at once while Kueue holds the MPIJob suspended, and resumes
    # it with the MPIJob: its pod is made without waiting for the workers (launcherCreationPolicy notwithstanding).
    (launcher,) = [line for line in lines if line.startswith("  horovod-train-launcher-")]
    assert ": on system (system-" in launcher, lines
    assert lines[-1].startswith("0/1 MPIJobs scheduled")


def test_a_usage_error_is_one_line(repo_copy):
    result = run_simulate("--format", "yaml", cwd=repo_copy)
    assert result.returncode == 2
    assert result.stderr.startswith("simulate: argument --format: invalid choice: 'yaml'")
    assert result.stderr.rstrip().endswith("(see --help)") and len(result.stderr.splitlines()) == 1


def test_an_install_without_kubernetes_says_so_in_one_line(repo_copy, tmp_path):
    environment = {**os.environ, "EKS_GPU_GITOPS": str(broken_tool(tmp_path))}
    result = subprocess.run(
        [str(repo_copy / "scripts" / "simulate")], cwd=repo_copy, env=environment, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith("simulate: eks-gpu-gitops is missing the Python package ")
    assert len(result.stderr.splitlines()) == 1


def test_pods_the_api_server_refuses_are_reported_with_the_operators_warning(repo_copy, kueue_env):
    namespace = repo_copy / "overlays" / "base" / "training" / "namespace.yaml"
    text = namespace.read_text()
    assert "pod-security.kubernetes.io/enforce: baseline" in text
    namespace.write_text(text.replace("enforce: baseline", "enforce: restricted"))
    result = run_simulate("--env", "prod", "--timeout", "30", "--format", "json", cwd=repo_copy, env=kueue_env)
    assert result.returncode == 1, result.stderr
    (job,) = json.loads(result.stdout)["jobs"]
    assert (job["scheduled"], job["pods"]) == (False, [])
    assert job["error"].startswith(
        "not all pods placed within the time limit; launcher 0/1 created, worker 0/2 created; last warning: "
        'worker pod created failed: pods "horovod-train-worker-0" is forbidden: '
        'violates PodSecurity "restricted:latest"'
    )


@pytest.mark.parametrize(
    ("max_size", "says"),
    [
        (1_000_000_000, "node group gpu: maxSize 1000000000 makes more than 1000 nodes in all"),
        ("many", "node group gpu: maxSize 'many' is not a whole number of nodes"),
        (-1, "node group gpu: maxSize -1 is not a whole number of nodes"),
    ],
)
def test_a_node_group_simulate_cannot_make_is_refused_before_any_node_is(max_size, says):
    # A hand-written maxSize of a billion made a billion Node objects in memory before anything failed.
    config = prod_cluster_config()
    config["managedNodeGroups"][1]["maxSize"] = max_size
    with pytest.raises(InputError, match=f"^{says}"):
        node_docs(config)
    config["managedNodeGroups"][1]["maxSize"] = 450  # the EKS default quota per managed node group: made
    nodes, groups = node_docs(config)
    assert [g["nodes"] for g in groups if g["name"] == "gpu"] == [450] and len(nodes) >= 450


# --- Kueue's manager on the local control plane ---------------------------------------------------------------

QUEUE = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                }
            ],
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
    },
]


def mpijob(name: str, labels: dict) -> dict:
    template = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 2, "template": template},
            }
        },
    }


@pytest.fixture(scope="module")
def kueue_plane(kueue_env):
    """etcd and kube-apiserver with the MPIJob CRD, and Kueue's manager as the chart configures it."""
    from kubernetes import client, config, dynamic

    saved = {k: os.environ.get(k) for k in kueue_env}
    os.environ.update(kueue_env)
    plane = ControlPlane()
    try:
        plane.start()
        api = config.new_client_from_config(str(plane.kubeconfig))
        crds = [
            d
            for d in yaml.safe_load_all(
                (
                    Path(kueue_env.get("GITOPS_SCHEMA_DIR", SCHEMA_DIR)) / "crds" / "kubeflow.org_mpijobs.yaml"
                ).read_text()
            )
            if d
        ]
        for doc in crds:
            doc.pop("status", None)
            client.ApiextensionsV1Api(api).create_custom_resource_definition(doc)
        manager = kueue.Kueue(plane, kueue.Release(), kueue.crd_docs())
        manager.start()
        objects = dynamic.DynamicClient(api)
        for doc in QUEUE:
            objects.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).create(
                body=doc, namespace=doc["metadata"].get("namespace")
            )
        yield plane, manager, objects
    finally:
        plane.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def wait_for(read, timeout: float = 30.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(0.3)
    return read()


def test_kueue_runs_with_the_charts_configuration_and_its_webhooks_on_loopback(kueue_plane):
    plane, manager, objects = kueue_plane
    configuration = manager.configuration
    assert "kubeflow.org/mpijob" in configuration["integrations"]["frameworks"]
    assert "manageJobsWithoutQueueName" not in configuration  # the chart's default: false
    assert configuration["leaderElection"]["leaderElect"] is False
    assert configuration["internalCertManagement"] == {
        "enable": True,
        "webhookServiceName": "kueue-webhook-service",
        "webhookSecretName": "kueue-webhook-server-cert",
    }
    hooks = objects.resources.get(api_version="admissionregistration.k8s.io/v1", kind="MutatingWebhookConfiguration")
    (mpijob_hook,) = [
        w for w in hooks.get(name="kueue-mutating-webhook-configuration").webhooks if w.name == "mmpijob.kb.io"
    ]
    assert (
        mpijob_hook.clientConfig.url == f"https://127.0.0.1:{manager.ports.webhook}/mutate-kubeflow-org-v2beta1-mpijob"
    )
    # The cert rotator kept the certificate made for 127.0.0.1 (a new one would fail the API server's calls).
    secret = objects.resources.get(api_version="v1", kind="Secret").get(
        name="kueue-webhook-server-cert", namespace="kueue-system"
    )
    import base64

    assert base64.b64decode(secret.data["tls.crt"]) == (manager.certs / "tls.crt").read_bytes()
    assert plane.processes[kueue.BINARY].poll() is None


def test_an_mpijob_with_the_queue_label_is_suspended_by_kueue_then_admitted_as_one_workload(kueue_plane):
    _, _, objects = kueue_plane
    jobs = objects.resources.get(api_version="kubeflow.org/v2beta1", kind="MPIJob")
    created = jobs.create(body=mpijob("queued", {"kueue.x-k8s.io/queue-name": "lq"}), namespace="default")
    assert created.spec.runPolicy.suspend is True  # set by Kueue's mutating webhook: the request had none
    workloads = objects.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")

    def admitted():
        mine = [w for w in workloads.get(namespace="default").items if w.metadata.ownerReferences[0].name == "queued"]
        if not mine:
            return None
        conditions = {c.type: c.status for c in (mine[0].status and mine[0].status.conditions) or []}
        return mine[0] if conditions.get("Admitted") == "True" else None

    workload = wait_for(admitted)
    assert workload is not None, [w.to_dict() for w in workloads.get(namespace="default").items]
    assert workload.spec.queueName == "lq"
    assert sorted((p.name, p.count) for p in workload.spec.podSets) == [("launcher", 1), ("worker", 2)]
    conditions = {c.type: c.status for c in workload.status.conditions}
    assert conditions["QuotaReserved"] == "True" and conditions["Admitted"] == "True"
    assert workload.status.admission.clusterQueue == "cq"
    assert wait_for(lambda: jobs.get(name="queued", namespace="default").spec.runPolicy.suspend is False)


def test_an_mpijob_above_the_queues_quota_stays_suspended_with_kueues_reason(kueue_plane):
    _, _, objects = kueue_plane
    jobs = objects.resources.get(api_version="kubeflow.org/v2beta1", kind="MPIJob")
    big = mpijob("big", {"kueue.x-k8s.io/queue-name": "lq"})
    big["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 8  # 9 cpu; the queue has 4
    jobs.create(body=big, namespace="default")
    workloads = objects.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")

    def pending_reason():
        for w in workloads.get(namespace="default").items:
            if w.metadata.ownerReferences[0].name == "big":
                for c in (w.status and w.status.conditions) or []:
                    if c.type == "QuotaReserved" and c.status == "False" and "cpu" in (c.message or ""):
                        return c.message
        return None

    message = wait_for(pending_reason)
    assert message and "insufficient quota for cpu in flavor default" in message, message
    assert jobs.get(name="big", namespace="default").spec.runPolicy.suspend is True


def test_an_mpijob_without_the_queue_label_is_left_to_run(kueue_plane):
    _, _, objects = kueue_plane
    jobs = objects.resources.get(api_version="kubeflow.org/v2beta1", kind="MPIJob")
    created = jobs.create(body=mpijob("free", {}), namespace="default")
    assert not (created.spec.runPolicy or {}).get("suspend")  # manageJobsWithoutQueueName: false (the chart's)
    workloads = objects.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    names = [w.metadata.ownerReferences[0].name for w in workloads.get(namespace="default").items]
    assert "free" not in names


def test_simulate_passes_only_when_each_queued_job_waits_behind_scheduled_ones():
    from eks_gpu_gitops.live.simulate import Admission, JobResult, PodPlace, Simulation

    def job(name, placed, admission=None):
        pods = [PodPlace(f"{name}-worker-0", "worker", node="gpu-0" if placed else "", reason="" if placed else "no")]
        return JobResult("training", name, {"worker": 1}, pods=pods if admission is None else [], admission=admission)

    waiting = Admission(workload="w", message="insufficient unused quota for cpu in flavor gpu", held_by=["first"])
    waiting.waiting_for_quota = True
    assert Simulation("prod", jobs=[job("first", True), job("second", False, waiting)]).fits is True
    assert Simulation("prod", jobs=[job("first", False), job("second", False, waiting)]).fits is False
    refused = Admission(workload="w", message="insufficient quota for cpu in flavor gpu, ... > maximum capacity")
    refused_job = job("second", False, refused)
    assert (refused_job.refused, refused_job.state) == (True, "NOT scheduled")
    assert Simulation("prod", jobs=[job("first", True), refused_job]).fits is False
    nobody = Admission(workload="w", message="insufficient unused quota for cpu in flavor gpu")
    nobody.waiting_for_quota = True
    assert Simulation("prod", jobs=[job("first", True), job("second", False, nobody)]).fits is False


def test_kueue_is_configured_from_the_environments_helm_release():
    (environment,) = render_repository(REPO, ["prod"])
    release = kueue.release_of(environment.objects)
    assert (release.name, release.namespace, release.fullname) == ("kueue", "kueue-system", "kueue")
    assert release.config_yaml == kueue.CHART_CONFIG  # the template sets no managerConfig: the chart's
    (helm_release,) = [m for m in environment.objects if m.kind == "HelmRelease" and m.name == "kueue"]
    doc = json.loads(json.dumps(helm_release.doc))
    doc["spec"]["releaseName"] = "queues"
    doc["spec"]["values"]["managerConfig"] = {
        "controllerManagerConfigYaml": kueue.CHART_CONFIG + "manageJobsWithoutQueueName: true\n"
    }
    doc["spec"]["values"]["controllerManager"]["featureGates"] = [{"name": "PartialAdmission", "enabled": False}]
    changed = kueue._release(doc)
    plane = ControlPlane()  # not started: only its folder
    try:
        configuration = kueue.Kueue(plane, changed, [])._configuration()
        assert configuration["manageJobsWithoutQueueName"] is True
        assert configuration["internalCertManagement"]["webhookSecretName"] == "queues-kueue-webhook-server-cert"
        assert configuration["webhook"]["host"] == "127.0.0.1"
        assert kueue.Kueue(plane, changed, [])._feature_gates() == "PartialAdmission=false"
    finally:
        plane.stop()
    others = [m for m in environment.objects if not (m.kind == "HelmRelease" and m.name == "kueue")]
    assert kueue.release_of(others).notes  # a ClusterQueue without the chart's release: the chart's defaults
    assert kueue.release_of([m for m in others if m.group != kueue.GROUP]) is None
