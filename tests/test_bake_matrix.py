"""Bake a named option matrix and check every result as a user's CI would, by parsing it.

Each bake has both environments: dev (small single-GPU nodes, scratch FSx, no EFA) and
prod (the answers). Together the options cover EFA on and off, g5/g6/p4d/p5 types, two or
more Kubernetes versions, and scratch and persistent FSx.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import SCHEMA_DIR, TEMPLATE
from eks_gpu_gitops.facts import catalog, eks

MATRIX = {
    "default": {},
    "g5-12xlarge-efa-off-1.33": {"gpu_instance_type": "g5.12xlarge", "efa": "off", "kubernetes_version": "1.33"},
    "g6-48xlarge-efa-on-persistent2": {
        "gpu_instance_type": "g6.48xlarge",
        "efa": "on",
        "gpu_node_count": "4",
        "fsx_deployment_type": "PERSISTENT_2",
        "fsx_capacity_gib": "2400",
    },
    "p5-48xlarge-1.35-persistent1-s3-capacity-block": {
        "gpu_instance_type": "p5.48xlarge",
        "gpu_capacity_reservation": "cr-0123456789abcdef0",
        "gpu_capacity_block": "yes",
        "kubernetes_version": "1.35",
        "fsx_deployment_type": "PERSISTENT_1",
        "fsx_s3_import_path": "s3://training-data-bucket/imagenet",
        "aws_region": "us-east-1",
        "availability_zone": "us-east-1d",
    },
    "g5-xlarge-auto-no-efa-scratch1": {
        "gpu_instance_type": "g5.xlarge",
        "gpu_node_count": "1",
        "fsx_deployment_type": "SCRATCH_1",
        "fsx_capacity_gib": "3600",
        "kubernetes_version": "1.32",
    },
    "p4d-scratch2-s3": {"project_name": "Vision Team", "fsx_s3_import_path": "s3://vision-data"},
    "dev-spot": {"dev_gpu_spot": "yes"},
}
DEFAULTS = json.loads((TEMPLATE / "cookiecutter.json").read_text())
ENVS = ("dev", "prod")
DEV_TYPE = DEFAULTS["_dev_instance_type"]


def answer(options: dict, key: str) -> str:
    return options.get(key, DEFAULTS[key])


def efa_expected(options: dict) -> bool:
    choice = answer(options, "efa")
    return choice == "on" or (choice == "auto" and catalog.lookup(answer(options, "gpu_instance_type")).has_efa)


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def case(request, bake_factory):
    options = MATRIX[request.param]
    return bake_factory(request.param, **options), options


def worker(mpijob: dict) -> dict:
    return mpijob["spec"]["mpiReplicaSpecs"]["Worker"]


def launcher_argv(mpijob: dict) -> list[str]:
    """The launcher's whole command line: mpirun and its options, then the program and its flags."""
    launcher = next(
        c
        for c in mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        if c["name"] == "launcher"
    )
    return launcher["command"] + launcher["args"]


def gpu_instance(options: dict, env: str) -> catalog.InstanceType:
    return catalog.lookup(DEV_TYPE if env == "dev" else answer(options, "gpu_instance_type"))


def gpu_nodes(options: dict, env: str) -> int:
    return int(DEFAULTS["_dev_node_count"] if env == "dev" else answer(options, "gpu_node_count"))


def gpu_group(cluster_config: dict) -> dict:
    return next(g for g in cluster_config["managedNodeGroups"] if g["name"] == "gpu")


def test_no_template_syntax_survives(case):
    bake, _ = case
    leftovers = []
    for path in bake.path.rglob("*"):
        if path.is_file() and ".venv" not in path.parts:
            text = path.read_text(errors="ignore")
            if re.search(r"{{\s?cookiecutter\.", text) or "{%" in text and path.suffix in (".yaml", ".md"):
                leftovers.append(str(path.relative_to(bake.path)))
    assert leftovers == []


def test_yamllint_clean_with_generated_config(case):
    bake, _ = case
    result = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-f", "parsable", "."],
        cwd=bake.path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_validates_clean(case):
    """The bake's own scripts/validate, as its CI runs it: lint, render, schemas and every rule."""
    bake, _ = case
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(GITOPS_SCHEMA_DIR=str(SCHEMA_DIR))
    result = subprocess.run(["scripts/validate"], cwd=bake.path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "0 errors, 0 warnings," in result.stdout + result.stderr, result.stdout[-4000:] + result.stderr[-4000:]


def test_every_object_passes_strict_schemas(case, schema_checker):
    bake, options = case
    problems = []
    for env in ENVS:
        environment = bake.environments[env]
        version = environment.cluster_config.doc["metadata"]["version"]
        assert version == answer(options, "kubernetes_version")
        for manifest in [*environment.objects, environment.cluster_config]:
            problems += [f"{env} {p.manifest.resource}: {p.message}" for p in schema_checker.check(manifest, version)]
    assert problems == []


@pytest.mark.parametrize("env", ENVS)
def test_workers_fill_gpu_nodes(case, env):
    bake, options = case
    instance = gpu_instance(options, env)
    nodes = gpu_nodes(options, env)
    mpijob = bake.one(env, "MPIJob")
    container = worker(mpijob)["template"]["spec"]["containers"][0]
    assert mpijob["spec"]["slotsPerWorker"] == instance.gpus
    assert container["resources"]["limits"]["nvidia.com/gpu"] == instance.gpus
    assert container["resources"]["requests"]["nvidia.com/gpu"] == instance.gpus
    assert worker(mpijob)["replicas"] == nodes
    args = launcher_argv(mpijob)
    assert args[args.index("-np") + 1] == str(nodes * instance.gpus)
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(launcher.get("resources"))
    group = gpu_group(bake.cluster_config(env))
    assert group["instanceType"] == instance.name
    assert group["maxSize"] >= nodes


@pytest.mark.parametrize("env", ENVS)
def test_efa_where_chosen(case, env):
    bake, options = case
    on = env == "prod" and efa_expected(options)
    instance = catalog.lookup(answer(options, "gpu_instance_type"))
    group = gpu_group(bake.cluster_config(env))
    assert group["efaEnabled"] is on
    assert len(group["availabilityZones"]) == 1
    assert group["availabilityZones"] == [
        answer(options, "availability_zone") if "availability_zone" in options else answer(options, "aws_region") + "a"
    ]
    resources = worker(bake.one(env, "MPIJob"))["template"]["spec"]["containers"][0]["resources"]
    daemonsets = {d["metadata"]["name"] for d in bake.objects(env, "DaemonSet")}
    args = launcher_argv(bake.one(env, "MPIJob"))
    if on:
        assert resources["limits"]["vpc.amazonaws.com/efa"] == instance.efa_interfaces
        assert resources["requests"]["vpc.amazonaws.com/efa"] == instance.efa_interfaces
        assert "aws-efa-k8s-device-plugin" in daemonsets
        for export in ("FI_EFA_USE_HUGE_PAGE=0", "FI_PROVIDER=efa", "NCCL_NET=Libfabric"):
            assert export in args[: args.index("python")], export
        # eksctl's own DaemonSet (v0.230.0 pkg/addons/assets/efa-device-plugin.yaml), so Flux takes it over,
        # with the image from Amazon EKS's registry in the environment's region.
        [plugin] = [d for d in bake.objects(env, "DaemonSet") if d["metadata"]["name"] == "aws-efa-k8s-device-plugin"]
        assert plugin["metadata"]["namespace"] == "kube-system"
        assert plugin["spec"]["selector"] == {"matchLabels": {"name": "aws-efa-k8s-device-plugin"}}
        image = plugin["spec"]["template"]["spec"]["containers"][0]["image"]
        region = answer(options, "aws_region")
        assert image == f"{eks.eks_image_registry(region)}/eks/aws-efa-k8s-device-plugin:v0.5.20"
        assert f".dkr.ecr.{region}.amazonaws.com/" in image
    else:
        assert "vpc.amazonaws.com/efa" not in resources["limits"]
        assert "aws-efa-k8s-device-plugin" not in daemonsets
        assert not {"FI_EFA_USE_HUGE_PAGE=0", "FI_PROVIDER=efa", "NCCL_NET=Libfabric"} & set(args)


@pytest.mark.parametrize("env", ENVS)
def test_device_plugins_tolerate_gpu_taint_with_eksctl_names(case, env):
    bake, _ = case
    taint = gpu_group(bake.cluster_config(env))["taints"][0]
    assert (taint["key"], taint["value"], taint["effect"]) == ("nvidia.com/gpu", "true", "NoSchedule")
    for daemonset in bake.objects(env, "DaemonSet"):
        assert daemonset["metadata"]["namespace"] == "kube-system"
        tolerations = daemonset["spec"]["template"]["spec"]["tolerations"]
        assert any(t["key"] == "nvidia.com/gpu" and t.get("effect") == "NoSchedule" for t in tolerations)
        image = daemonset["spec"]["template"]["spec"]["containers"][0]["image"]
        assert re.search(r":v\d+\.\d+\.\d+$", image), image
    names = {d["metadata"]["name"] for d in bake.objects(env, "DaemonSet")}
    assert "nvidia-device-plugin-daemonset" in names
    workers = worker(bake.one(env, "MPIJob"))["template"]["spec"]
    assert any(t["key"] == "nvidia.com/gpu" for t in workers["tolerations"])
    labels = gpu_group(bake.cluster_config(env))["labels"]
    assert labels | workers["nodeSelector"] == labels, "workers select labels the GPU node group does not have"


@pytest.mark.parametrize("env", ENVS)
def test_fsx_storage(case, env):
    bake, options = case
    storage_class = bake.one(env, "StorageClass")
    claim = bake.one(env, "PersistentVolumeClaim")
    params = storage_class["parameters"]
    assert storage_class["provisioner"] == "fsx.csi.aws.com"
    # Per-cluster values Flux substitutes from the cluster-settings ConfigMap (test_day_one_parts).
    assert (params["subnetId"], params["securityGroupIds"]) == ("${FSX_SUBNET_ID}", "${FSX_SECURITY_GROUP_ID}")
    assert all(isinstance(v, str) for v in params.values())
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == storage_class["metadata"]["name"]
    assert claim["metadata"]["namespace"] == bake.one(env, "MPIJob")["metadata"]["namespace"]
    if env == "dev":
        assert params["deploymentType"] == "SCRATCH_2" and claim["spec"]["resources"]["requests"]["storage"] == "1200Gi"
        assert "s3ImportPath" not in params and "perUnitStorageThroughput" not in params
        return
    deployment = answer(options, "fsx_deployment_type")
    assert params["deploymentType"] == deployment
    assert claim["spec"]["resources"]["requests"]["storage"] == f"{answer(options, 'fsx_capacity_gib')}Gi"
    expected_throughput = {"PERSISTENT_1": "200", "PERSISTENT_2": "250"}.get(deployment)
    assert params.get("perUnitStorageThroughput") == expected_throughput
    assert params.get("s3ImportPath") == (answer(options, "fsx_s3_import_path") or None)


@pytest.mark.parametrize("env", ENVS)
def test_flux_applies_infrastructure_then_training(case, env):
    bake, _ = case
    kustomizations = {k.name: k for k in bake.environments[env].kustomizations}
    # flux-system: what `flux bootstrap --path=clusters/<env>` applies; here only the two Kustomizations.
    assert set(kustomizations) == {"flux-system", "infrastructure", "training"}
    assert kustomizations["flux-system"].objects == []
    infra = kustomizations["infrastructure"].manifest.doc["spec"]
    training = kustomizations["training"].manifest.doc["spec"]
    assert infra["wait"] is True and infra["prune"] is True
    assert training["dependsOn"] == [{"name": "infrastructure"}] and training["prune"] is True
    assert infra["path"] == f"./overlays/{env}/infrastructure"
    kinds = {m.kind for m in kustomizations["infrastructure"].objects}
    assert {"HelmRelease", "HelmRepository", "GitRepository", "Kustomization", "StorageClass"} <= kinds
    training_kinds = {m.kind for m in kustomizations["training"].objects}
    assert training_kinds == {
        "Namespace",
        "PersistentVolumeClaim",
        "MPIJob",
        "Deployment",
        "Service",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    }
    names = {m.name for m in kustomizations["infrastructure"].objects}
    assert {"aws-fsx-csi-driver", "mpi-operator"} <= names


def test_cluster_identity_and_least_privilege(case):
    bake, options = case
    for env in ENVS:
        config = bake.cluster_config(env)
        assert config["metadata"]["name"].endswith(f"-{env}")
        assert config["metadata"]["region"] == answer(options, "aws_region")
        association = config["iam"]["podIdentityAssociations"][0]
        assert (association["namespace"], association["serviceAccountName"]) == ("kube-system", "fsx-csi-controller-sa")
        assert "eks-pod-identity-agent" in {a["name"] for a in config["addons"]}
        assert "withOIDC" not in config["iam"]
    text = "\n".join(p.read_text() for p in bake.path.rglob("*.yaml") if ".venv" not in p.parts)
    assert not re.search(r"AKIA[0-9A-Z]{16}|aws_secret_access_key", text, re.I)


def test_flux_never_sees_cluster_config_or_trainer(case):
    bake, _ = case
    lines = (bake.path / ".sourceignore").read_text().split()
    assert "/*" in lines and "!/clusters/" in lines and "!/overlays/" in lines
    assert "/overlays/*/eksctl/" in lines and "/overlays/base/eksctl/" in lines
    assert "!/trainer/" not in lines


# Every answer that shapes an environment differs from the default bake here.
OTHER_ENVIRONMENT_ANSWERS = {
    "gpu_instance_type": "g6.48xlarge",
    "gpu_node_count": "4",
    "efa": "off",
    "fsx_deployment_type": "PERSISTENT_1",
    "fsx_capacity_gib": "2400",
    "fsx_s3_import_path": "s3://other-bucket/data",
}


def tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bases_carry_no_environments_values(bake_factory):
    """Two bakes whose environment answers all differ have byte-identical overlays/base trees: every
    per-environment value is in overlays/<env>/settings.yaml, written by the generator."""
    default = bake_factory("default")
    other = bake_factory("other-environment-answers", **OTHER_ENVIRONMENT_ANSWERS)
    assert tree(default.path / "overlays" / "base") == tree(other.path / "overlays" / "base")
    assert (default.path / "overlays/prod/settings.yaml").read_bytes() != (
        other.path / "overlays/prod/settings.yaml"
    ).read_bytes()
    assert gpu_group(other.cluster_config("prod"))["instanceType"] == "g6.48xlarge"


def test_readme_rows_come_from_the_environment_generator(bake_factory):
    from eks_gpu_gitops.generate import bake as template
    from eks_gpu_gitops.generate.environment import readme_row

    bake = bake_factory("other-environment-answers", **OTHER_ENVIRONMENT_ANSWERS)
    answers = json.loads((bake.path / ".cruft.json").read_text())["context"]["cookiecutter"]
    rows = [line for line in (bake.path / "README.md").read_text().splitlines() if line.startswith("| `")]
    assert rows == [readme_row(spec) for spec in template.environments(answers)]
    assert rows[1].startswith("| `prod` | ")
    assert "4 x g6.48xlarge (8 GPUs each) | off | PERSISTENT_1, 2400 GiB, imports s3://other-bucket/data" in rows[1]


def test_only_the_environment_that_imports_from_s3_may_list_the_bucket(bake_factory):
    bake = bake_factory("other-environment-answers", **OTHER_ENVIRONMENT_ANSWERS)
    policies = {
        env: bake.cluster_config(env)["iam"]["podIdentityAssociations"][0].get("permissionPolicy") for env in ENVS
    }
    assert policies["dev"] is None
    assert policies["prod"]["Statement"] == [
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::other-bucket"]}
    ]


# What eksctl v0.230.0 writes into the DaemonSets it installs (pkg/addons/assets/efa-device-plugin.yaml,
# nvidia-device-plugin.yaml): container and volume names, mount paths, securityContext. Flux's server-side
# apply merges the repository's copy with these fields, so the copy must agree with them.
EKSCTL_PLUGINS = {
    "aws-efa-k8s-device-plugin": {
        "container": "aws-efa-k8s-device-plugin",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": False,
        },
        "mounts": {"device-plugin": "/var/lib/kubelet/device-plugins", "infiniband-volume": "/dev/infiniband/"},
    },
    "nvidia-device-plugin-daemonset": {
        "container": "nvidia-device-plugin-ctr",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "mounts": {"kubelet-device-plugins-dir": "/var/lib/kubelet/device-plugins"},
    },
}


@pytest.mark.parametrize("env", ENVS)
def test_device_plugins_agree_with_the_fields_eksctl_wrote(case, env):
    bake, _ = case
    for daemonset in bake.objects(env, "DaemonSet"):
        expected = EKSCTL_PLUGINS[daemonset["metadata"]["name"]]
        pod = daemonset["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["name"] == expected["container"]
        assert container["securityContext"] == expected["securityContext"]
        assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]} == expected["mounts"]
        assert {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]} == expected["mounts"]


@pytest.mark.parametrize("env", ENVS)
def test_day_one_parts(case, env):
    """The launcher waits for its workers, Flux fills in the per-cluster values, TensorBoard reads the
    logs read-only, and the cluster sends GPU and EFA metrics to CloudWatch with Pod Identity."""
    bake, _ = case
    assert bake.one(env, "MPIJob")["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    entry = yaml.safe_load((bake.path / "clusters" / env / "infrastructure.yaml").read_text())
    assert entry["spec"]["postBuild"] == {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-settings"}]}
    [storage_class] = bake.objects(env, "StorageClass")
    assert storage_class["parameters"]["subnetId"] == "${FSX_SUBNET_ID}"
    assert storage_class["parameters"]["securityGroupIds"] == "${FSX_SECURITY_GROUP_ID}"
    assert "REPLACE-ME" not in (bake.path / "overlays" / env / "settings.yaml").read_text()
    [tensorboard] = [d for d in bake.objects(env, "Deployment") if d["metadata"]["name"] == "tensorboard"]
    pod = tensorboard["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "fsx-training", "readOnly": True}
    assert pod["containers"][0]["volumeMounts"][0] == {"name": "fsx", "mountPath": "/fsx", "readOnly": True}
    assert (
        pod["containers"][0]["image"]
        == bake.one(env, "MPIJob")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    )
    addons = {a["name"]: a for a in bake.cluster_config(env)["addons"]}
    assert addons["amazon-cloudwatch-observability"]["podIdentityAssociations"] == [
        {
            "serviceAccountName": "cloudwatch-agent",
            "permissionPolicyARNs": ["arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"],
        }
    ]
    assert "eks-pod-identity-agent" in addons


@pytest.mark.parametrize("env", ENVS)
def test_gpu_nodes_scale_from_zero(case, env):
    """An idle environment runs no GPU node: the group starts empty and Cluster Autoscaler, whose image
    matches the cluster's Kubernetes minor, grows it from the node-template tags."""
    bake, options = case
    group = gpu_group(bake.cluster_config(env))
    nodes = gpu_nodes(options, env)
    assert (group["minSize"], group["desiredCapacity"], group["maxSize"]) == (0, 0, nodes)
    assert group["propagateASGTags"] is True
    prefix = "k8s.io/cluster-autoscaler/node-template"
    assert group["tags"][f"{prefix}/taint/nvidia.com/gpu"] == "true:NoSchedule"
    efa = f"{prefix}/resources/vpc.amazonaws.com/efa"
    if group.get("efaEnabled"):
        assert group["tags"][efa] == str(catalog.lookup(group["instanceType"]).efa_interfaces)
    else:
        assert efa not in group["tags"]
    [release] = [r for r in bake.objects(env, "HelmRelease") if r["metadata"]["name"] == "cluster-autoscaler"]
    values = release["spec"]["values"]
    assert values["image"]["tag"].startswith(f"v{answer(options, 'kubernetes_version')}.")
    assert values["autoDiscovery"]["clusterName"] == bake.cluster_config(env)["metadata"]["name"]
    assert values["awsRegion"] == bake.cluster_config(env)["metadata"]["region"]
    associations = bake.cluster_config(env)["iam"]["podIdentityAssociations"]
    assert {
        "namespace": "kube-system",
        "serviceAccountName": values["rbac"]["serviceAccount"]["name"],
        "wellKnownPolicies": {"autoScaler": True},
    } in associations


@pytest.mark.parametrize("env", ENVS)
def test_jobs_queue_for_what_the_gpu_group_holds(case, env):
    """Kueue admits every MPIJob whole, against a quota equal to the gpu group at maxSize."""
    bake, options = case
    instance = gpu_instance(options, env)
    nodes = gpu_nodes(options, env)
    mpijob = bake.one(env, "MPIJob")
    assert mpijob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == bake.one(env, "LocalQueue")["metadata"]["name"]
    [group] = bake.one(env, "ClusterQueue")["spec"]["resourceGroups"]
    gpu = next(f for f in group["flavors"] if f["name"] == "gpu")
    quota = {r["name"]: r["nominalQuota"] for r in gpu["resources"]}
    assert quota["nvidia.com/gpu"] == nodes * instance.gpus
    assert quota["cpu"] == nodes * instance.vcpus and quota["memory"] == f"{nodes * instance.memory_gib}Gi"
    efa = env == "prod" and efa_expected(options)
    assert quota.get("vpc.amazonaws.com/efa", 0) == (nodes * instance.efa_interfaces if efa else 0)
    assert set(group["coveredResources"]) == set(quota)
    releases = {r["metadata"]["name"]: r for r in bake.objects(env, "HelmRelease")}
    assert releases["kueue"]["spec"]["chartRef"] == {"kind": "OCIRepository", "name": "kueue"}


@pytest.mark.parametrize("env", ENVS)
def test_reserved_capacity_where_chosen(case, env):
    bake, options = case
    group = gpu_group(bake.cluster_config(env))
    reservation = answer(options, "gpu_capacity_reservation") if env == "prod" else ""
    if reservation:
        assert group["capacityReservation"] == {"capacityReservationTarget": {"capacityReservationID": reservation}}
    else:
        assert "capacityReservation" not in group
    block = env == "prod" and answer(options, "gpu_capacity_block") == "yes"
    assert group.get("instanceMarketOptions") == ({"marketType": "capacity-block"} if block else None)
    spot = env == "dev" and answer(options, "dev_gpu_spot") == "yes"
    assert group.get("spot") == (True if spot else None)
    components = yaml.safe_load((bake.path / "overlays" / env / "eksctl" / "kustomization.yaml").read_text())
    assert ("../../base/eksctl/spot" in components["components"]) == spot


def test_environment_settings_are_never_rendered(case):
    bake, _ = case
    for env in ENVS:
        assert not [m for m in bake.environments[env].objects if m.kind == "EnvironmentSettings"]


def test_answers_recorded_for_cruft(case):
    bake, options = case
    state = json.loads((bake.path / ".cruft.json").read_text())
    recorded = state["context"]["cookiecutter"]
    for key, value in options.items():
        assert recorded[key] == value
    assert not {"_output_dir", "_repo_dir"} & set(recorded)
    assert state["template"]
