"""scripts/cluster-settings: the per-cluster values Flux substitutes, written once after eksctl.

AWS cannot be reached here, so the lookup runs against a stand-in `aws` that answers in the AWS
CLI's JSON shapes and records how it was called; kubectl is the real one (with no cluster).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from eks_gpu_gitops.model.substitution import CLUSTER_SETTINGS, CLUSTER_VARIABLES
from eks_gpu_gitops.render.repository import render_repository

SUBNET, GROUP = "subnet-0a1b2c3d4e5f60718", "sg-0123456789abcdef0"
ENDPOINT = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"


def run(*args: str, path: str | None = None, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    if path is not None:
        env["PATH"] = path
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    command = [str(REPO / "scripts" / "cluster-settings"), *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    return line.removeprefix("cluster-settings: ")


def prod_cluster() -> tuple[str, str, str]:
    config = render_repository(REPO, ["prod"])[0].cluster_config.doc
    [gpu] = [g for g in config["managedNodeGroups"] if g["name"] == "gpu"]
    return config["metadata"]["name"], config["metadata"]["region"], gpu["availabilityZones"][0]


@pytest.fixture
def fake_aws(tmp_path):
    """An `aws` on PATH that logs its arguments and answers from tmp_path/subnets.json."""
    log, subnets, endpoint = tmp_path / "calls.jsonl", tmp_path / "subnets.json", tmp_path / "endpoint"
    subnets.write_text(json.dumps([{"SubnetId": SUBNET}]))
    endpoint.write_text(ENDPOINT)
    script = tmp_path / "bin" / "aws"
    script.parent.mkdir()
    script.write_text(f"""#!{sys.executable}
import json, sys
with open({str(log)!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["eks", "describe-cluster"]:
    vpc = {{"subnetIds": ["subnet-0aaaaaaaaaaaaaaaa", "{SUBNET}"], "clusterSecurityGroupId": "{GROUP}"}}
    url = open({str(endpoint)!r}).read()
    print(json.dumps({{"cluster": {{"endpoint": url, "resourcesVpcConfig": vpc}}}}))
elif sys.argv[1:3] == ["ec2", "describe-subnets"]:
    print(json.dumps({{"Subnets": json.load(open({str(subnets)!r}))}}))
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"path": f"{script.parent}:{os.environ['PATH']}", "log": log, "subnets": subnets, "endpoint": endpoint}


def test_print_writes_the_namespace_and_the_config_map_flux_reads():
    result = run("--env", "prod", "--subnet-id", SUBNET, "--security-group-id", GROUP, "--print")
    assert result.returncode == 0, result.stderr
    namespace, config_map = yaml.safe_load_all(result.stdout)
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}
    assert (config_map["kind"], config_map["metadata"]["name"]) == ("ConfigMap", CLUSTER_SETTINGS)
    assert config_map["metadata"]["namespace"] == "flux-system"  # the Flux Kustomizations' own namespace
    assert config_map["data"] == {"FSX_SUBNET_ID": SUBNET, "FSX_SECURITY_GROUP_ID": GROUP}
    assert set(config_map["data"]) == set(CLUSTER_VARIABLES)


def test_every_environment_reads_the_cluster_settings():
    for env in ("dev", "prod"):
        entry = yaml.safe_load((REPO / "clusters" / env / "infrastructure.yaml").read_text())
        assert entry["spec"]["postBuild"]["substituteFrom"] == [{"kind": "ConfigMap", "name": CLUSTER_SETTINGS}]
        settings = (REPO / "overlays" / env / "settings.yaml").read_text()
        assert "REPLACE-ME" not in settings
        assert "subnetId: ${FSX_SUBNET_ID}" in settings and "securityGroupIds: ${FSX_SECURITY_GROUP_ID}" in settings


def test_looks_up_the_private_subnet_in_the_gpu_zone_and_the_cluster_security_group(fake_aws):
    result = run("--env", "prod", "--print", path=fake_aws["path"])
    assert result.returncode == 0, result.stderr
    config_map = list(yaml.safe_load_all(result.stdout))[1]
    assert config_map["data"] == {"FSX_SUBNET_ID": SUBNET, "FSX_SECURITY_GROUP_ID": GROUP}
    cluster, region, zone = prod_cluster()
    describe, subnets = [json.loads(line) for line in fake_aws["log"].read_text().splitlines()]
    assert describe[:2] == ["eks", "describe-cluster"] and describe[2:6] == ["--region", region, "--name", cluster]
    assert subnets[:2] == ["ec2", "describe-subnets"] and f"Name=availability-zone,Values={zone}" in subnets
    assert "Name=tag-key,Values=kubernetes.io/role/internal-elb" in subnets  # eksctl's private subnets


def test_a_given_value_wins_over_the_lookup(fake_aws):
    other = "sg-0fedcba9876543210"
    result = run("--env", "prod", "--security-group-id", other, "--print", path=fake_aws["path"])
    assert result.returncode == 0, result.stderr
    assert list(yaml.safe_load_all(result.stdout))[1]["data"]["FSX_SECURITY_GROUP_ID"] == other


def test_refuses_a_zone_with_no_single_private_subnet(fake_aws):
    fake_aws["subnets"].write_text(json.dumps([{"SubnetId": SUBNET}, {"SubnetId": "subnet-0bbbbbbbbbbbbbbbb"}]))
    line = one_line(run("--env", "prod", "--print", path=fake_aws["path"]))
    cluster, _, zone = prod_cluster()
    assert line == f"cluster {cluster} has 2 private subnets in {zone}, not one; give --subnet-id"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--subnet-id", "subnet-xyz", "--security-group-id", GROUP], "--subnet-id: 'subnet-xyz' is not a subnet id"),
        (
            ["--subnet-id", SUBNET, "--security-group-id", "sg-1"],
            "--security-group-id: 'sg-1' is not a security group id",
        ),
        (
            ["--env", "nope", "--subnet-id", SUBNET, "--security-group-id", GROUP],
            "unknown environment 'nope'; known: dev, prod",
        ),
    ],
    ids=["subnet", "security-group", "environment"],
)
def test_bad_input_is_one_line_and_writes_nothing(args, message):
    env = [] if "--env" in args else ["--env", "prod"]
    assert one_line(run(*env, *args, "--print")) == message


def test_without_the_aws_cli_it_asks_for_the_values(tmp_path):
    bin_dir = tmp_path / "bin"  # what scripts/tool and the render need, and no aws
    bin_dir.mkdir()
    for name in ("bash", "env", "dirname", "kubectl", "kustomize"):
        if shutil.which(name):
            (bin_dir / name).symlink_to(shutil.which(name))
    line = one_line(run("--env", "prod", "--print", path=str(bin_dir)))
    assert line == "the AWS CLI (aws) is not installed; give --subnet-id and --security-group-id instead"


def kubeconfig(tmp_path: Path, servers: dict[str, str]) -> Path:
    """A kubeconfig with one context per server, each named like its key; no server answers."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in servers.items()],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in servers],
        "current-context": next(iter(servers)),
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_refuses_to_write_into_a_context_of_another_cluster(fake_aws, tmp_path):
    config = kubeconfig(tmp_path, {"dev": "https://DEV.gr7.us-west-2.eks.amazonaws.com", "prod": ENDPOINT})
    cluster, _, _ = prod_cluster()
    line = one_line(run("--env", "prod", path=fake_aws["path"], kubeconfig=config))
    assert line == (
        f"the current context points at https://DEV.gr7.us-west-2.eks.amazonaws.com, not cluster {cluster} "
        f"({ENDPOINT}); give --context with the cluster's context (eksctl wrote it to the kubeconfig)"
    )


def test_writes_through_kubectl_once_the_context_is_the_cluster(fake_aws, tmp_path):
    # The right context, but nothing listens there: kubectl's own error, in one line.
    config = kubeconfig(tmp_path, {"dev": "https://DEV.gr7.us-west-2.eks.amazonaws.com", "prod": "https://127.0.0.1:1"})
    fake_aws["endpoint"].write_text("https://127.0.0.1:1")
    line = one_line(run("--env", "prod", "--context", "prod", path=fake_aws["path"], kubeconfig=config))
    assert line.startswith("kubectl apply: "), line


def test_a_missing_kube_context_is_one_line(fake_aws, tmp_path):
    config = kubeconfig(tmp_path, {"prod": ENDPOINT})
    args = ("--env", "prod", "--subnet-id", SUBNET, "--security-group-id", GROUP, "--context", "nope")
    line = one_line(run(*args, path=fake_aws["path"], kubeconfig=config))
    assert line.startswith("kubectl config: ") and "nope" in line, line
