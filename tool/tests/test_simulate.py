"""scripts/simulate: the environment's MPIJobs placed by kube-scheduler on kwok nodes made from its eksctl
node groups, on the local control plane (skipped without its binaries unless GITOPS_REQUIRE_CONTROL_PLANE)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, broken_tool, need_binaries

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.live.simulate import node_docs
from eks_gpu_gitops.render.repository import render_repository

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kwok", "mpi-operator")


def run_simulate(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ}
    environment.pop("GITOPS_DEBUG", None)
    return subprocess.run(
        [str(cwd / "scripts" / "simulate"), *args], cwd=cwd, env=environment, capture_output=True, text=True
    )


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


def test_prod_job_is_placed_launcher_on_system_workers_on_gpu(repo_copy):
    need_binaries(COMPONENTS)
    result = run_simulate("--env", "prod", "--format", "json", cwd=repo_copy)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (job,) = report["jobs"]
    assert (job["namespace"], job["name"], job["scheduled"]) == ("training", "horovod-train", True)
    placed = sorted((p["role"], p["nodeGroup"]) for p in job["pods"])
    assert placed == [("launcher", "system"), ("worker", "gpu"), ("worker", "gpu")]
    assert all(p["node"] and not p["reason"] for p in job["pods"])
    notes = "\n".join(report["notes"])
    assert "PersistentVolumeClaim training/fsx-training is bound to a stub PersistentVolume" in notes
    assert "Kueue queue training is not simulated" in notes
    assert "simulate: applying training (9 objects)" in result.stderr.splitlines()


def test_workers_asking_more_gpus_than_a_node_has_stay_pending_with_the_schedulers_reason(repo_copy):
    need_binaries(COMPONENTS)
    settings = repo_copy / "overlays" / "prod" / "settings.yaml"
    text = settings.read_text()
    assert text.count("nvidia.com/gpu: 8") == 2  # requests and limits of workerResources
    settings.write_text(text.replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 16"))
    result = run_simulate("--env", "prod", cwd=repo_copy)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "MPIJob training/horovod-train: NOT scheduled" in lines
    pending = [line for line in lines if ": Pending: " in line]
    assert [line.split(":")[0].strip() for line in pending] == ["horovod-train-worker-0", "horovod-train-worker-1"]
    assert all("Insufficient nvidia.com/gpu" in line for line in pending)
    assert "  launcher: not created (the MPI operator waits for the workers to be Ready)" in lines
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


def test_pods_the_api_server_refuses_are_reported_with_the_operators_warning(repo_copy):
    need_binaries(COMPONENTS)
    namespace = repo_copy / "overlays" / "base" / "training" / "namespace.yaml"
    text = namespace.read_text()
    assert "pod-security.kubernetes.io/enforce: baseline" in text
    namespace.write_text(text.replace("enforce: baseline", "enforce: restricted"))
    result = run_simulate("--env", "prod", "--timeout", "15", "--format", "json", cwd=repo_copy)
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
