"""Write a cluster's per-cluster values into its cluster-settings ConfigMap, which Flux substitutes.

    scripts/cluster-settings --env ENV [--subnet-id SUBNET] [--security-group-id SG] [--context CTX] [--print]

Run once after `eksctl create cluster` (before or after `flux bootstrap`). The values exist only
once eksctl has made the VPC, so no file in the repository holds them: each Flux Kustomization
reads them from the ConfigMap flux-system/cluster-settings (postBuild.substituteFrom).

- FSX_SUBNET_ID: the cluster's private subnet in the GPU nodes' zone. eksctl tags its private
  subnets kubernetes.io/role/internal-elb (v0.230.0, pkg/cfn/builder/vpc_ipv4.go).
- FSX_SECURITY_GROUP_ID: the EKS cluster security group. EKS puts every managed node in it and it
  admits all traffic from its members, so the nodes reach the file system on Lustre's ports
  (TCP 988 and 1018-1023) and the file system's servers reach each other.

A value not given is looked up with the AWS CLI (`aws eks describe-cluster`, `aws ec2
describe-subnets`, with the environment's region and cluster name from its ClusterConfig). The
ConfigMap (with the flux-system namespace) is applied with `kubectl apply --server-side` to the
current context or --context, once the context is known to point at the environment's cluster (its
API server is the endpoint `aws eks describe-cluster` gives): values written into another
environment's cluster would make an FSx StorageClass that cannot be changed. --print writes the
ConfigMap to stdout instead and touches no cluster.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from ..core.credentials import mask_text, without_userinfo
from ..core.errors import InputError
from ..model import mapping, sequence
from ..model.substitution import CLUSTER_SETTINGS, CLUSTER_VARIABLES
from ..render.repository import render_repository

VERB = "cluster-settings"
NAMESPACE = "flux-system"
FIELD_MANAGER = "gitops-cluster-settings"
_SUBNET = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
_SECURITY_GROUP = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
_TIMEOUT = 60


class Cluster:
    """What the environment's ClusterConfig says about the cluster: name, region, GPU zone."""

    def __init__(self, root: Path, env: str):
        config = render_repository(root, [env])[0].cluster_config
        if config is None:
            raise InputError(f"--env: {env} has no eksctl ClusterConfig (overlays/{env}/eksctl)")
        metadata = mapping(config.doc, "metadata")
        self.name, self.region = str(metadata.get("name", "")), str(metadata.get("region", ""))
        gpu = next((g for g in sequence(config.doc, "managedNodeGroups") if mapping(g).get("name") == "gpu"), {})
        zones = sequence(gpu, "availabilityZones")
        if not (self.name and self.region and len(zones) == 1):
            raise InputError(f"--env: {env}'s ClusterConfig has no name, region or single-zone gpu node group")
        self.zone = str(zones[0])


def _run(command: list[str], what: str, missing: str, stdin: str | None = None) -> str:
    """The output of one CLI call, or a one-line error: `missing` when the CLI is not installed, else
    the CLI's own first line of error, or a time-out."""
    if shutil.which(command[0]) is None:
        raise InputError(missing)
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise InputError(f"{what} took longer than {_TIMEOUT} s") from None
    if done.returncode != 0:  # the CLI's line may name a server with its userinfo, or echo a credential
        first = next((line for line in done.stderr.splitlines() if line.strip()), "no message")
        raise InputError(f"{what}: {mask_text(without_userinfo(first.strip()))}")
    return done.stdout


def _aws(*args: str):
    """The JSON answer of one AWS CLI call."""
    what = f"aws {args[0]} {args[1]}"
    missing = "the AWS CLI (aws) is not installed; give --subnet-id and --security-group-id instead"
    output = _run(["aws", *args, "--output", "json"], what, missing)
    try:
        return json.loads(output)
    except ValueError:
        raise InputError(f"{what}: the answer is not JSON") from None


def describe(cluster: Cluster) -> dict:
    """The EKS cluster's description: endpoint, resourcesVpcConfig."""
    answer = _aws("eks", "describe-cluster", "--region", cluster.region, "--name", cluster.name)
    found = answer.get("cluster") if isinstance(answer, dict) else None
    vpc = found.get("resourcesVpcConfig") if isinstance(found, dict) else None
    if not isinstance(vpc, dict) or not isinstance(vpc.get("subnetIds"), list) or not found.get("endpoint"):
        raise InputError(f"aws eks describe-cluster: no endpoint and subnets for cluster {cluster.name}")
    return found


def look_up(cluster: Cluster, description: dict) -> dict[str, str]:
    vpc = description["resourcesVpcConfig"]
    answer = _aws(
        "ec2",
        "describe-subnets",
        "--region",
        cluster.region,
        "--subnet-ids",
        *map(str, vpc["subnetIds"]),
        "--filters",
        f"Name=availability-zone,Values={cluster.zone}",
        "Name=tag-key,Values=kubernetes.io/role/internal-elb",
    )
    subnets = answer.get("Subnets") if isinstance(answer, dict) else None
    if not isinstance(subnets, list):
        raise InputError("aws ec2 describe-subnets: the answer has no Subnets")
    if len(subnets) != 1:
        raise InputError(
            f"cluster {cluster.name} has {len(subnets)} private subnets in {cluster.zone}, not one; give --subnet-id"
        )
    return {
        "FSX_SUBNET_ID": str(mapping(subnets[0]).get("SubnetId", "")),
        "FSX_SECURITY_GROUP_ID": str(vpc.get("clusterSecurityGroupId", "")),
    }


def check(values: dict[str, str]) -> None:
    for name, pattern, flag in (
        ("FSX_SUBNET_ID", _SUBNET, "--subnet-id"),
        ("FSX_SECURITY_GROUP_ID", _SECURITY_GROUP, "--security-group-id"),
    ):
        if not pattern.match(values[name]):
            raise InputError(f"{flag}: {values[name]!r} is not a {name.split('_', 1)[1].lower().replace('_', ' ')}")


def documents(env: str, values: dict[str, str]) -> str:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CLUSTER_SETTINGS,
            "namespace": NAMESPACE,
            "annotations": {"gitops.local/environment": env, "gitops.local/written-by": f"scripts/{VERB}"},
        },
        "data": {name: values[name] for name in CLUSTER_VARIABLES},
    }
    return yaml.safe_dump_all([namespace, config_map], sort_keys=False, explicit_start=True)


def _kubectl(context: str | None, *args: str, stdin: str | None = None) -> str:
    command = ["kubectl", *(["--context", context] if context else []), *args]
    missing = "kubectl is not installed; run with --print and apply the output yourself"
    return _run(command, f"kubectl {args[0]}", missing, stdin)


def check_context(context: str | None, cluster: Cluster, endpoint: str) -> None:
    """Refuse to write unless the kubeconfig context's API server is the environment's cluster."""
    # The kubeconfig's URL may carry a user and password: compared and shown without them.
    server = without_userinfo(
        _kubectl(context, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").strip()
    )
    endpoint = without_userinfo(endpoint.strip())
    if server.rstrip("/").lower() != endpoint.rstrip("/").lower():
        where = f"context {context}" if context else "the current context"
        raise InputError(
            f"{where} points at {mask_text(server) or 'no server'}, not cluster {cluster.name} ({endpoint}); "
            "give --context with the cluster's context (eksctl wrote it to the kubeconfig)"
        )


def apply(text: str, context: str | None) -> None:
    _kubectl(context, "apply", "--server-side", "--field-manager", FIELD_MANAGER, "-f", "-", stdin=text)
