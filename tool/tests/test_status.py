"""scripts/status against a real kube-apiserver: each check passing and failing on objects (and their
status) created through the API, the whole prod environment ready, and the one-line input errors."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from conftest import REPO, SCHEMA_DIR, install_crds

from eks_gpu_gitops.cli import status as status_command
from eks_gpu_gitops.live import status
from eks_gpu_gitops.live.cluster import connect
from eks_gpu_gitops.model.node_health import AGENT_CONDITIONS
from eks_gpu_gitops.render.repository import render_repository

NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def prod():
    return render_repository(REPO, ["prod"])[0]


@pytest.fixture(scope="module")
def api(own_control_plane):
    from kubernetes import client

    cluster = connect(kubeconfig=str(own_control_plane.kubeconfig))

    class Apis:
        pass

    apis = Apis()
    apis.cluster = cluster
    apis.core, apis.apps = client.CoreV1Api(cluster.api), client.AppsV1Api(cluster.api)
    apis.storage, apis.custom = client.StorageV1Api(cluster.api), client.CustomObjectsApi(cluster.api)
    apis.extensions = client.ApiextensionsV1Api(cluster.api)
    return apis


@pytest.fixture()
def namespace(api):
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.core.create_namespace({"metadata": {"name": name}})
    return name


def add_node(api, name: str, labels: dict, allocatable: dict, ready: str = "True"):
    api.core.create_node({"metadata": {"name": name, "labels": labels}})
    condition = {"type": "Ready", "status": ready, "reason": "KubeletReady", "lastHeartbeatTime": NOW}
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable}
    api.core.patch_node_status(
        name, {"status": {"allocatable": capacity, "capacity": capacity, "conditions": [condition]}}
    )


def group(name: str, instance: str, min_size: int, efa: bool = False) -> dict:
    return {"name": name, "instanceType": instance, "minSize": min_size, "maxSize": 2, "efaEnabled": efa}


# --- nodes per node group ----------------------------------------------------------------------------


def test_a_p4d_group_whose_nodes_offer_8_gpus_and_4_efa_interfaces_is_ok(api):
    label = {"alpha.eksctl.io/nodegroup-name": "gpu-ok"}
    add_node(api, "gpu-ok-1", label, {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"})

    check = status.check_node_group(group("gpu-ok", "p4d.24xlarge", 0, efa=True), api.core.list_node().items)

    assert (check.status, check.check) == ("ok", "nodes gpu-ok")
    assert check.message == "1 node(s) Ready (p4d.24xlarge, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 4)"


def test_a_managed_group_node_found_by_the_eks_label_missing_its_gpus_fails(api):
    # EKS's own label for a managed group's nodes; the device plugin has not advertised the GPUs.
    add_node(api, "gpu-bad-1", {"eks.amazonaws.com/nodegroup": "gpu-bad"}, {"vpc.amazonaws.com/efa": "4"})

    check = status.check_node_group(group("gpu-bad", "p4d.24xlarge", 0, efa=True), api.core.list_node().items)

    assert check.status == "fail"
    assert "gpu-bad-1 nvidia.com/gpu 0/8" in check.message
    assert "efa" not in check.message.split(": ", 1)[1]
    assert check.fix


def test_a_node_short_of_efa_interfaces_and_not_ready_fails(api):
    add_node(api, "efa-bad-1", {"alpha.eksctl.io/nodegroup-name": "efa-bad"}, {"nvidia.com/gpu": "8"}, ready="False")

    check = status.check_node_group(group("efa-bad", "p4d.24xlarge", 0, efa=True), api.core.list_node().items)

    assert check.status == "fail"
    assert check.message.endswith("efa-bad-1 not Ready; efa-bad-1 vpc.amazonaws.com/efa 0/4")


def test_a_gpu_group_at_zero_nodes_that_scales_from_zero_is_ok_and_says_so(api):
    check = status.check_node_group(group("idle-gpu", "g5.xlarge", 0), api.core.list_node().items)

    assert (check.status, check.message) == ("ok", "0 nodes (g5.xlarge); the group scales from zero (minSize 0)")


def test_a_group_at_zero_nodes_with_min_size_2_fails(api):
    check = status.check_node_group(group("system-x", "m6i.xlarge", 2), api.core.list_node().items)

    assert check.status == "fail"
    assert check.message == "0 nodes labelled alpha.eksctl.io/nodegroup-name=system-x, minSize 2"
    assert "--include=system-x" in check.fix


# --- GPU node health (the EKS node monitoring agent's conditions) -------------------------------------------

# The agent's own True reasons and a fatal reason and message (aws/eks-node-monitoring-agent v1.7.0,
# cmd/eks-node-monitoring-agent/main.go; monitors/nvidia/dcgm/dcgm_policies.go handleXidFinding).
HEALTHY = {
    "AcceleratedHardwareReady": ("NvidiaGPUIsReady", "Monitoring for the Nvidia GPU system is active"),
    "ContainerRuntimeReady": ("ContainerRuntimeIsReady", "Monitoring for the ContainerRuntime system is active"),
    "KernelReady": ("KernelIsReady", "Monitoring for the Kernel system is active"),
    "NetworkingReady": ("NetworkingIsReady", "Monitoring for the Networking system is active"),
    "StorageReady": ("DiskIsReady", "Monitoring for the Disk system is active"),
}
XID_79 = ("NvidiaXID79Error", "detected XID-79 on the instance, review kernel logs for additional information.")


def agent_condition(state: str, reason: str, message: str, kind: str = "AcceleratedHardwareReady") -> dict:
    return {"type": kind, "status": state, "reason": reason, "message": message, "lastHeartbeatTime": NOW}


def add_gpu_node(api, name: str, group_name: str, agent: dict | None = None, instance_id: str = "i-0123456789abcdef0"):
    """A p4d node of a node group, with the agent's conditions `agent` ({type: (status, reason, message)})."""
    api.core.create_node(
        {
            "metadata": {"name": name, "labels": {"alpha.eksctl.io/nodegroup-name": group_name}},
            "spec": {"providerID": f"aws:///us-west-2a/{instance_id}"},
        }
    )
    conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": NOW}]
    conditions += [agent_condition(*state, kind=kind) for kind, state in (agent or {}).items()]
    capacity = {"cpu": "96", "memory": "1152Gi", "pods": "110", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}
    api.core.patch_node_status(
        name, {"status": {"allocatable": capacity, "capacity": capacity, "conditions": conditions}}
    )


def healthy_agent(**failing) -> dict:
    agent = {kind: ("True", *HEALTHY[kind]) for kind in AGENT_CONDITIONS}
    agent.update({kind: ("False", *reason_message) for kind, reason_message in failing.items()})
    return agent


def gpu_group(name: str, repair: dict | None = None) -> dict:
    found = {**group(name, "p4d.24xlarge", 0, efa=True)}
    if repair is not None:
        found["nodeRepairConfig"] = repair
    return found


def test_a_gpu_node_whose_accelerated_hardware_is_not_ready_fails_and_says_repair_is_off(api):
    add_gpu_node(api, "hw-off-1", "hw-off", healthy_agent(AcceleratedHardwareReady=XID_79), "i-0aaaaaaaaaaaaaaa1")
    add_gpu_node(api, "hw-off-2", "hw-off", healthy_agent())

    checks = status.check_node_health(gpu_group("hw-off"), api.core.list_node().items)

    assert [(c.check, c.status) for c in checks] == [("node-health hw-off", "fail"), ("node-health hw-off", "ok")]
    failed = checks[0]
    assert failed.message == (
        "hw-off-1 AcceleratedHardwareReady False: NvidiaXID79Error: "
        "detected XID-79 on the instance, review kernel logs for additional information."
    )
    assert failed.fix.startswith("kubectl cordon hw-off-1, then kubectl drain hw-off-1 ")
    assert "repair is off for node group hw-off" in failed.fix
    assert "aws ec2 terminate-instances --instance-ids i-0aaaaaaaaaaaaaaa1" in failed.fix
    assert "auto repair" not in failed.fix
    assert checks[1].message.startswith("1 node(s) healthy")


def test_a_failing_gpu_node_in_a_group_with_repair_on_says_auto_repair_replaces_it_in_10_minutes(api):
    add_gpu_node(api, "hw-on-1", "hw-on", healthy_agent(AcceleratedHardwareReady=XID_79))

    [check] = status.check_node_health(gpu_group("hw-on", {"enabled": True}), api.core.list_node().items)

    assert (check.status, check.check) == ("fail", "node-health hw-on")
    assert check.message.startswith("hw-on-1 AcceleratedHardwareReady False: NvidiaXID79Error: ")
    assert check.fix.startswith("kubectl cordon hw-on-1")
    assert check.fix.endswith(
        "EKS node auto repair (on for hw-on) will reboot or replace it when it has been False for 10 minutes"
    )
    assert "repair is off" not in check.fix and "terminate-instances" not in check.fix


def test_repair_turned_off_explicitly_and_an_override_for_the_reason_are_each_reported(api):
    failing = {"NetworkingReady": ("False", "InterfaceNotUp", "interface eth1 is down")}
    add_gpu_node(api, "net-1", "net", {**healthy_agent(), **failing})
    override = {
        "nodeMonitoringCondition": "NetworkingReady",
        "nodeUnhealthyReason": "InterfaceNotUp",
        "minRepairWaitTimeMins": 5,
        "repairAction": "Replace",
    }
    nodes = api.core.list_node().items

    [off] = status.check_node_health(gpu_group("net", {"enabled": False}), nodes)
    [overridden] = status.check_node_health(
        gpu_group("net", {"enabled": True, "nodeRepairConfigOverrides": [override]}), nodes
    )

    assert off.message == "net-1 NetworkingReady False: InterfaceNotUp: interface eth1 is down"
    assert "repair is off for node group net" in off.fix
    assert overridden.fix.endswith(
        "EKS node auto repair (on for net) will Replace it 5 minutes after the agent detected it "
        "(nodeRepairConfigOverrides)"
    )


def test_two_failing_conditions_on_one_node_fail_once_each(api):
    add_gpu_node(
        api,
        "two-1",
        "two",
        healthy_agent(AcceleratedHardwareReady=XID_79, KernelReady=("KernelBug", "kernel BUG at mm/slub.c")),
    )

    checks = status.check_node_health(gpu_group("two"), api.core.list_node().items)

    assert [c.status for c in checks] == ["fail", "fail"]
    assert [c.message.split(": ")[0] for c in checks] == [
        "two-1 AcceleratedHardwareReady False",
        "two-1 KernelReady False",
    ]


def test_healthy_gpu_nodes_are_one_ok_naming_the_conditions_read(api):
    add_gpu_node(api, "well-1", "well", healthy_agent())
    add_gpu_node(api, "well-2", "well", healthy_agent())

    checks = status.check_node_health(gpu_group("well"), api.core.list_node().items)

    assert [(c.check, c.status, c.message, c.fix) for c in checks] == [
        (
            "node-health well",
            "ok",
            "2 node(s) healthy, agent conditions read: "
            "AcceleratedHardwareReady, ContainerRuntimeReady, KernelReady, NetworkingReady, StorageReady True",
            "",
        )
    ]


def test_gpu_nodes_without_the_agent_s_conditions_warn_once_for_the_group(api):
    add_gpu_node(api, "mute-1", "mute")
    add_gpu_node(api, "mute-2", "mute")
    add_gpu_node(api, "mute-3", "mute", healthy_agent())

    checks = status.check_node_health(gpu_group("mute"), api.core.list_node().items)

    assert [c.status for c in checks] == ["warn", "ok"]
    assert checks[0].message.startswith("no health reported by 2 node(s) (mute-1, mute-2): ")
    assert "eks-node-monitoring-agent" in checks[0].fix
    assert checks[1].message.startswith("1 node(s) healthy")


def test_a_secret_in_an_agent_message_is_masked_and_the_message_kept_on_one_line(api):
    message = "probe https://bot:hunter2-secret@metadata.example.com failed\nsecond line"
    agent = healthy_agent(StorageReady=("IODelays", message))
    add_gpu_node(api, "leak-1", "leak", agent)

    [check] = status.check_node_health(gpu_group("leak"), api.core.list_node().items)
    text, data = status.report([check], "text"), json.loads(status.report([check], "json"))

    assert check.message == (
        "leak-1 StorageReady False: IODelays: probe https://bot:***@metadata.example.com failed second line"
    )
    assert "hunter2" not in text and "hunter2" not in data[0]["message"]
    assert text.count("\n") == 0


# --- device plugin DaemonSets ------------------------------------------------------------------------


def add_daemonset(api, namespace: str, name: str, desired: int, ready: int):
    labels = {"app": name}
    api.apps.create_namespaced_daemon_set(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            },
        },
    )
    counts = {"desiredNumberScheduled": desired, "currentNumberScheduled": desired, "numberReady": ready}
    api.apps.patch_namespaced_daemon_set_status(name, namespace, {"status": {**counts, "numberMisscheduled": 0}})


def test_a_device_plugin_daemonset_ready_on_every_node_is_ok(api, namespace):
    add_daemonset(api, namespace, "nvidia-device-plugin-daemonset", desired=2, ready=2)

    check = status.check_daemonset(api.apps, namespace, "nvidia-device-plugin-daemonset")

    assert (check.status, check.message) == ("ok", "2/2 ready")


def test_a_device_plugin_daemonset_not_ready_everywhere_fails(api, namespace):
    add_daemonset(api, namespace, "aws-efa-k8s-device-plugin", desired=2, ready=1)

    check = status.check_daemonset(api.apps, namespace, "aws-efa-k8s-device-plugin")

    assert (check.status, check.message) == ("fail", "1/2 ready")
    assert check.fix == f"kubectl -n {namespace} describe daemonset aws-efa-k8s-device-plugin"


def test_a_missing_daemonset_fails(api, namespace):
    check = status.check_daemonset(api.apps, namespace, "nvidia-device-plugin-daemonset")

    assert (check.check, check.status, check.message) == (
        f"daemonset {namespace}/nvidia-device-plugin-daemonset",
        "fail",
        "not found",
    )


# --- deployments (MPI operator, FSx CSI controller) ------------------------------------------------------


def add_deployment(api, namespace: str, name: str, available: str):
    labels = {"app": name}
    api.apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            },
        },
    )
    condition = {"type": "Available", "status": available, "reason": "MinimumReplicas", "message": "replicas"}
    replicas = 1 if available == "True" else 0
    api.apps.patch_namespaced_deployment_status(
        name,
        namespace,
        {
            "status": {
                "replicas": 1,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "conditions": [condition],
            }
        },
    )


def test_an_available_operator_deployment_is_ok(api, namespace):
    add_deployment(api, namespace, "mpi-operator", "True")

    check = status.check_deployment(api.apps, namespace, "mpi-operator", "fix")

    assert (check.status, check.message) == ("ok", "1/1 available")


def test_an_unavailable_fsx_controller_fails(api, namespace):
    add_deployment(api, namespace, "fsx-csi-controller", "False")

    check = status.check_deployment(api.apps, namespace, "fsx-csi-controller", "fix")

    assert (check.status, check.message) == ("fail", "not Available: replicas")


def test_a_missing_operator_deployment_fails_with_the_given_fix(api, namespace):
    check = status.check_deployment(api.apps, namespace, "mpi-operator", "reconcile it")

    assert (check.status, check.message, check.fix) == ("fail", "not found", "reconcile it")


# --- the MPIJob CRD --------------------------------------------------------------------------------------


def test_the_mpijob_crd_serving_v2beta1_is_ok(api):
    check = status.check_mpijob_crd(api.extensions)

    assert (check.check, check.status, check.message) == ("crd mpijobs.kubeflow.org", "ok", "v2beta1 served")


def test_a_missing_mpijob_crd_fails(api, own_control_plane):
    api.extensions.delete_custom_resource_definition(status.MPIJOB_CRD)
    try:
        deadline = time.monotonic() + 30
        while any(c.metadata.name == status.MPIJOB_CRD for c in api.extensions.list_custom_resource_definition().items):
            assert time.monotonic() < deadline
            time.sleep(0.2)

        check = status.check_mpijob_crd(api.extensions)

        assert (check.status, check.message) == ("fail", "not installed")
    finally:
        install_crds(own_control_plane, [SCHEMA_DIR / "crds" / "kubeflow.org_mpijobs.yaml"])


# --- the FSx CSI driver, StorageClass and claim ----------------------------------------------------------


def test_the_fsx_csi_driver_missing_fails_then_registered_is_ok(api):
    missing = status.check_csi_driver(api.storage)
    api.storage.create_csi_driver({"metadata": {"name": "fsx.csi.aws.com"}, "spec": {"attachRequired": False}})
    registered = status.check_csi_driver(api.storage)
    api.storage.delete_csi_driver("fsx.csi.aws.com")

    assert (missing.status, missing.message) == ("fail", "not registered")
    assert (registered.status, registered.message) == ("ok", "registered")


def test_the_storage_class_missing_fails_then_present_is_ok(api):
    name = f"fsx-{uuid.uuid4().hex[:6]}"
    missing = status.check_storage_class(api.storage, name)
    api.storage.create_storage_class({"metadata": {"name": name}, "provisioner": "fsx.csi.aws.com"})
    present = status.check_storage_class(api.storage, name)

    assert (missing.status, missing.message) == ("fail", "not found")
    assert (present.status, present.message) == ("ok", "provisioner fsx.csi.aws.com")


def add_claim(api, namespace: str, name: str, phase: str | None):
    api.core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "fsx-lustre",
                "resources": {"requests": {"storage": "1200Gi"}},
            },
        },
    )
    if phase:
        api.core.patch_namespaced_persistent_volume_claim_status(name, namespace, {"status": {"phase": phase}})


def test_a_bound_claim_is_ok(api, namespace):
    add_claim(api, namespace, "fsx-training", "Bound")

    check = status.check_claim(api.core, namespace, "fsx-training")

    assert (check.check, check.status) == (f"claim {namespace}/fsx-training", "ok")


def test_a_pending_claim_fails(api, namespace):
    add_claim(api, namespace, "fsx-training", "Pending")

    check = status.check_claim(api.core, namespace, "fsx-training")

    assert (check.status, check.message) == ("fail", "Pending, not Bound")
    assert check.fix == f"kubectl -n {namespace} describe pvc fsx-training"


# --- Flux Kustomizations ---------------------------------------------------------------------------------


def add_kustomization(api, namespace: str, name: str, ready: str | None, message: str = ""):
    api.custom.create_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        namespace,
        "kustomizations",
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name},
            "spec": {
                "interval": "10m",
                "path": "./x",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            },
        },
    )
    if ready:
        condition = {"type": "Ready", "status": ready, "reason": "R", "message": message, "lastTransitionTime": NOW}
        api.custom.patch_namespaced_custom_object_status(
            "kustomize.toolkit.fluxcd.io",
            "v1",
            namespace,
            "kustomizations",
            name,
            {"status": {"conditions": [condition]}},
        )


def test_a_ready_kustomization_is_ok(api, namespace):
    add_kustomization(api, namespace, "infrastructure", "True", "Applied revision: main@sha1:abc")

    check = status.check_kustomization(api.custom, namespace, "infrastructure")

    assert (check.status, check.message) == ("ok", "Ready: Applied revision: main@sha1:abc")


def test_a_failed_kustomization_fails_with_flux_s_message(api, namespace):
    add_kustomization(api, namespace, "training", "False", "dependency 'flux-system/infrastructure' is not ready")

    check = status.check_kustomization(api.custom, namespace, "training")

    assert (check.status, check.message) == ("fail", "not Ready: dependency 'flux-system/infrastructure' is not ready")
    assert check.fix == f"flux reconcile kustomization training -n {namespace} --with-source"


def test_a_kustomization_without_a_ready_condition_warns_and_a_missing_one_fails(api, namespace):
    add_kustomization(api, namespace, "training", None)

    waiting = status.check_kustomization(api.custom, namespace, "training")
    missing = status.check_kustomization(api.custom, namespace, "infrastructure")

    assert (waiting.status, waiting.message) == ("warn", "no Ready condition yet")
    assert (missing.status, missing.message) == ("fail", "not found")


def test_a_credential_in_flux_s_message_is_masked_in_text_and_json(api, namespace):
    message = "failed to checkout: https://bot:hunter2-secret@git.example.com/team/repo.git: 401"
    add_kustomization(api, namespace, "training", "False", message)
    check = status.check_kustomization(api.custom, namespace, "training")

    text, data = status.report([check], "text"), json.loads(status.report([check], "json"))

    assert "hunter2" not in text and "hunter2" not in json.dumps(data)
    assert text.startswith(f"fail kustomization {namespace}/training: not Ready: failed to checkout: https://bot:***@")
    assert data[0]["message"] == "not Ready: failed to checkout: https://bot:***@git.example.com/team/repo.git: 401"


def test_a_missing_kubeconfig_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))

    assert status_command.main(["--env", "prod"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"status: no usable kubeconfig at {tmp_path / 'absent'}: ")
    assert err.count("\n") == 1


# --- MPIJobs ---------------------------------------------------------------------------------------------


def add_mpijob(api, prod, namespace: str, condition: str, replica_statuses: dict):
    [job] = [m.doc for m in prod.objects if m.kind == "MPIJob"]
    doc = {**job, "metadata": {"name": job["metadata"]["name"]}}
    api.custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", doc)
    conditions = [{"type": condition, "status": "True", "reason": "R", "message": "m", "lastTransitionTime": NOW}]
    api.custom.patch_namespaced_custom_object_status(
        "kubeflow.org",
        "v2beta1",
        namespace,
        "mpijobs",
        doc["metadata"]["name"],
        {"status": {"conditions": conditions, "replicaStatuses": replica_statuses}},
    )
    return doc["metadata"]["name"]


def test_a_running_mpijob_is_ok_with_its_launcher_and_worker_phases(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Running", {"Launcher": {"active": 1}, "Worker": {"active": 2}})

    check = status.check_mpijob(api.custom, api.core, namespace, name)

    assert (check.status, check.message) == ("ok", "Running (launcher 1 active; worker 2 active)")


def test_a_failed_mpijob_without_a_launcher_verdict_fails_with_the_operator_s_message(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Failed", {"Launcher": {"failed": 1}, "Worker": {}})

    check = status.check_mpijob(api.custom, api.core, namespace, name)

    assert (check.status, check.message) == ("fail", "Failed: m (launcher 1 failed; worker none)")
    assert check.fix == f"kubectl -n {namespace} logs job/{name}-launcher"


# The labels the MPI operator v0.8.2 sets on a launcher pod (pkg/controller/mpi_job_controller.go, defaultLabels).
def launcher_labels(job_name: str) -> dict:
    return {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": job_name,
        "training.kubeflow.org/job-role": "launcher",
    }


def add_launcher_pod(api, namespace: str, pod: str, job_name: str, message: str, restarted: bool = False):
    """A launcher pod whose `launcher` container ended with `message` as its termination message: in state, or in
    lastState when it was restarted (restartPolicy OnFailure) and waits to run again."""
    # No controller makes the namespace's default ServiceAccount here; pod admission needs it.
    if not api.core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items:
        api.core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    api.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": pod, "labels": launcher_labels(job_name)},
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "launcher", "image": "trainer"}]},
        },
    )
    terminated = {"exitCode": 1, "reason": "Error", "message": message, "startedAt": NOW, "finishedAt": NOW}
    if restarted:
        state = {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": terminated}}
    else:
        state = {"state": {"terminated": terminated}}
    container = {"name": "launcher", "image": "trainer", "imageID": "", "ready": False, "restartCount": 0, **state}
    api.core.patch_namespaced_pod_status(
        pod, namespace, {"status": {"phase": "Running" if restarted else "Failed", "containerStatuses": [container]}}
    )


FAIL_VERDICT = "fabric-check: FAIL all_reduce busbw 120.5 GB/s at 1073741824 B < floor 250 GB/s (p5.48xlarge)"
NCCL_TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 120.5\n#\n"


def test_a_failed_mpijob_shows_its_launcher_s_verdict_and_not_another_job_s(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Failed", {"Launcher": {"failed": 1}, "Worker": {}})
    add_launcher_pod(api, namespace, f"{name}-launcher-abcde", name, NCCL_TAIL + FAIL_VERDICT + "\n")
    add_launcher_pod(api, namespace, "a-other-launcher-fghij", "other", "fabric-check: PASS elsewhere")

    check = status.check_mpijob(api.custom, api.core, namespace, name)

    assert (check.check, check.status) == (f"mpijob {namespace}/{name}", "fail")
    assert check.message == f"Failed: m; launcher: {FAIL_VERDICT} (launcher 1 failed; worker none)"
    assert check.fix == f"kubectl -n {namespace} logs job/{name}-launcher"


def test_a_restarted_launcher_s_last_verdict_is_read_from_its_last_state(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Failed", {"Launcher": {"failed": 1}, "Worker": {}})
    add_launcher_pod(api, namespace, f"{name}-launcher-abcde", name, FAIL_VERDICT, restarted=True)

    check = status.check_mpijob(api.custom, api.core, namespace, name)

    assert check.message == f"Failed: m; launcher: {FAIL_VERDICT} (launcher 1 failed; worker none)"


def test_a_succeeded_mpijob_shows_its_pass_verdict_in_the_ok_line(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Succeeded", {"Launcher": {"succeeded": 1}, "Worker": {}})
    verdict = "fabric-check: PASS all_reduce busbw 361.2 GB/s at 1073741824 B >= floor 250 GB/s (p5.48xlarge)"
    add_launcher_pod(api, namespace, f"{name}-launcher-abcde", name, verdict)

    check = status.check_mpijob(api.custom, api.core, namespace, name)

    assert (check.status, check.message) == ("ok", f"Succeeded: {verdict} (launcher 1 succeeded; worker none)")


def test_a_secret_in_the_launcher_s_termination_message_is_masked(api, prod, namespace):
    name = add_mpijob(api, prod, namespace, "Failed", {"Launcher": {"failed": 1}, "Worker": {}})
    add_launcher_pod(api, namespace, f"{name}-launcher-abcde", name, "fabric-check: FAIL HF_TOKEN=hf_hunter2secret")

    check = status.check_mpijob(api.custom, api.core, namespace, name)
    text = status.report([check], "text")

    assert check.message == "Failed: m; launcher: fabric-check: FAIL HF_TOKEN=*** (launcher 1 failed; worker none)"
    assert "hunter2" not in text


def test_a_kubelet_provider_id_that_is_no_instance_id_never_reaches_the_fix(api):
    add_gpu_node(api, "odd-1", "odd", healthy_agent(AcceleratedHardwareReady=XID_79), "i-1;curl x|sh")

    [failed] = status.check_node_health(gpu_group("odd", {"enabled": False}), api.core.list_node().items)

    assert "curl" not in failed.fix
    assert "--instance-ids <the node's instance id, from spec.providerID>" in failed.fix


def test_an_mpijob_not_on_the_cluster_warns(api, namespace):
    check = status.check_mpijob(api.custom, api.core, namespace, "horovod-train")

    assert check.status == "warn"


# --- a suspended MPIJob and its Kueue Workload -----------------------------------------------------------

KUEUE_MODULE = ("sigs.k8s.io/kueue", "v0.19.2")
EXCEEDS = (
    "couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor gpu, previously "
    "considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
)
WAITING = (
    "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor gpu, "
    "8 more needed"
)


@pytest.fixture(scope="module")
def workload_crd(own_control_plane):
    """Kueue's Workload CRD at the pinned release (config/components/crd/bases of the Go module; the shared schema
    folder holds Kueue's other CRDs only)."""
    from chart_repository import go_module_dir

    folder = go_module_dir(*KUEUE_MODULE)
    if folder is None:
        pytest.skip(f"{KUEUE_MODULE[0]}@{KUEUE_MODULE[1]} is not in the Go module cache nor the proxy")
    install_crds(own_control_plane, [folder / "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml"])


def add_workload(api, namespace: str, owner: dict, reason: str, message: str) -> None:
    """A Workload as Kueue's job reconciler makes it for the MPIJob `owner`, with a QuotaReserved condition False."""
    name = f"mpijob-{owner['metadata']['name']}-{uuid.uuid4().hex[:5]}"
    reference = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "controller": True}
    reference.update(name=owner["metadata"]["name"], uid=owner["metadata"]["uid"])
    pod = {"spec": {"containers": [{"name": "worker", "image": "trainer"}]}}
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "ownerReferences": [reference]},
        "spec": {"queueName": "training", "podSets": [{"name": "worker", "count": 2, "template": pod}]},
    }
    api.custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "workloads", doc)
    condition = {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}
    condition["lastTransitionTime"] = NOW
    api.custom.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", name, {"status": {"conditions": [condition]}}
    )


def suspended_mpijob(api, prod, namespace: str) -> dict:
    name = add_mpijob(api, prod, namespace, "Suspended", {"Launcher": {}, "Worker": {}})
    return api.custom.get_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", name)


# "Pending": Kueue v0.19.2's reason by default; ExceedsMaxQuota with its UnadmittedWorkloadsObservability gate on.
@pytest.mark.parametrize("reason", ["Pending", "ExceedsMaxQuota"])
def test_a_suspended_mpijob_above_the_whole_quota_fails_with_kueue_s_message_and_the_fix(
    api, prod, namespace, workload_crd, reason
):
    job = suspended_mpijob(api, prod, namespace)
    add_workload(api, namespace, job, reason, EXCEEDS)

    check = status.check_mpijob(api.custom, api.core, namespace, job["metadata"]["name"])

    assert check.status == "fail", check.line()
    assert check.message.startswith("Suspended, never admitted by training: Kueue: couldn't assign flavors"), check
    assert "> maximum capacity (8)" in check.message
    assert check.fix == status.QUOTA_FIX


@pytest.mark.parametrize("reason", ["Pending", "WaitingForQuota"])
def test_a_suspended_mpijob_waiting_behind_another_warns_with_kueue_s_message(
    api, prod, namespace, workload_crd, reason
):
    job = suspended_mpijob(api, prod, namespace)
    add_workload(api, namespace, job, reason, WAITING)

    check = status.check_mpijob(api.custom, api.core, namespace, job["metadata"]["name"])

    assert check.status == "warn", check.line()
    assert check.message.startswith("Suspended, waits for quota in training: Kueue: couldn't assign"), check
    assert "8 more needed" in check.message
    assert check.fix.startswith("it starts when the jobs ahead of it finish; to start it sooner, lower the job's")


def test_a_suspended_mpijob_without_its_own_workload_warns_and_names_the_queue_label(
    api, prod, namespace, workload_crd
):
    job = suspended_mpijob(api, prod, namespace)
    other = {"metadata": {"name": "another-job", "uid": str(uuid.uuid4())}}
    add_workload(api, namespace, other, "ExceedsMaxQuota", EXCEEDS)

    check = status.check_mpijob(api.custom, api.core, namespace, job["metadata"]["name"])

    assert check.status == "warn", check.line()
    assert check.message.startswith("Suspended, and no Kueue Workload for it"), check
    assert "kueue.x-k8s.io/queue-name" in check.fix


# --- the whole environment, through the command ----------------------------------------------------------


def make_prod_ready(api, prod):
    api.core.create_namespace({"metadata": {"name": "training"}})
    api.core.create_namespace({"metadata": {"name": "mpi-operator"}})
    for index in (1, 2):
        add_node(api, f"system-{index}", {"alpha.eksctl.io/nodegroup-name": "system"}, {})
    add_gpu_node(api, "gpu-1", "gpu", healthy_agent(), "i-0fedcba9876543210")
    add_daemonset(api, "kube-system", "nvidia-device-plugin-daemonset", 0, 0)
    add_daemonset(api, "kube-system", "aws-efa-k8s-device-plugin", 0, 0)
    add_deployment(api, "mpi-operator", "mpi-operator", "True")
    add_deployment(api, "kube-system", "fsx-csi-controller", "True")
    api.storage.create_csi_driver({"metadata": {"name": "fsx.csi.aws.com"}, "spec": {"attachRequired": False}})
    api.storage.create_storage_class({"metadata": {"name": "fsx-lustre"}, "provisioner": "fsx.csi.aws.com"})
    add_claim(api, "training", "fsx-training", "Bound")
    for name in ("flux-system", "infrastructure", "training", "mpi-operator"):
        add_kustomization(api, "flux-system", name, "True", "Applied revision: main@sha1:abc")
    add_mpijob(api, prod, "training", "Running", {"Launcher": {"active": 1}, "Worker": {"active": 2}})


def test_a_ready_prod_cluster_is_all_ok_then_a_lost_claim_fails_it(api, prod, own_control_plane, monkeypatch, capsys):
    api.core.create_namespace({"metadata": {"name": "flux-system"}})
    make_prod_ready(api, prod)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("KUBECONFIG", str(own_control_plane.kubeconfig))

    code = status_command.main(["--env", "prod", "--format", "json"])
    printed = capsys.readouterr()
    checks = json.loads(printed.out or "[]")

    assert (code, printed.err) == (0, "")
    assert {c["status"] for c in checks} == {"ok"}
    assert [c["check"] for c in checks] == [
        "nodes system",
        "nodes gpu",
        "node-health gpu",
        "daemonset kube-system/aws-efa-k8s-device-plugin",
        "daemonset kube-system/nvidia-device-plugin-daemonset",
        "crd mpijobs.kubeflow.org",
        "deployment mpi-operator/mpi-operator",
        "csidriver fsx.csi.aws.com",
        "deployment kube-system/fsx-csi-controller",
        "storageclass fsx-lustre",
        "claim training/fsx-training",
        "kustomization flux-system/flux-system",
        "kustomization flux-system/infrastructure",
        "kustomization flux-system/mpi-operator",
        "kustomization flux-system/training",
        "mpijob training/horovod-train",
    ]
    assert set(checks[0]) == {"check", "status", "message", "fix"}

    api.core.patch_namespaced_persistent_volume_claim_status("fsx-training", "training", {"status": {"phase": "Lost"}})
    code = status_command.main(["--env", "prod"])
    lines = capsys.readouterr().out.splitlines()

    assert code == 1
    assert [line for line in lines if not line.startswith("ok ")] == [
        "fail claim training/fsx-training: Lost, not Bound (fix: kubectl -n training describe pvc fsx-training)"
    ]

    # The GPU node's GPU fails: its own line, with the repair the template's gpu group has on.
    api.core.patch_node_status("gpu-1", {"status": {"conditions": [agent_condition("False", *XID_79)]}})
    code = status_command.main(["--env", "prod"])
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fail node-health")]
    [gpu] = [g for g in status.node_groups(prod) if g["name"] == "gpu"]

    assert gpu["nodeRepairConfig"]["enabled"] is True
    assert code == 1
    assert line.startswith(
        "fail node-health gpu: gpu-1 AcceleratedHardwareReady False: NvidiaXID79Error: detected XID-79 on the "
        "instance, review kernel logs for additional information. (fix: kubectl cordon gpu-1, then kubectl drain gpu-1"
    )
    assert line.endswith(
        "EKS node auto repair (on for gpu) will reboot or replace it when it has been False for 10 minutes)"
    )


# --- one-line input errors -------------------------------------------------------------------------------


def test_an_unknown_environment_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.chdir(REPO)

    code = status_command.main(["--env", "staging"])

    assert code == 2
    assert capsys.readouterr().err == "status: unknown environment 'staging'; known: dev, prod\n"


def test_no_environment_named_with_two_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.chdir(REPO)

    assert status_command.main([]) == 2
    assert capsys.readouterr().err == "status: name the environment with --env; known: dev, prod\n"


def test_an_unknown_context_is_one_line_and_exit_2(own_control_plane, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("KUBECONFIG", str(own_control_plane.kubeconfig))

    assert status_command.main(["--env", "prod", "--context", "prod-eu"]) == 2
    assert capsys.readouterr().err == (
        f"status: unknown context 'prod-eu' in {own_control_plane.kubeconfig}; known: local\n"
    )


def test_an_unreachable_cluster_is_one_line_and_exit_2(own_control_plane, monkeypatch, capsys, tmp_path):
    import yaml

    config = yaml.safe_load(own_control_plane.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))

    assert status_command.main(["--env", "prod"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("status: cannot reach the API server at https://127.0.0.1:1 (context 'local'): ")
    assert err.count("\n") == 1


def test_a_usage_error_through_scripts_status_is_one_line_and_exit_2():
    import os
    import subprocess

    env = {**os.environ}
    env.pop("GITOPS_DEBUG", None)
    result = subprocess.run(
        [str(REPO / "scripts" / "status"), "--format", "yaml"], cwd=REPO, env=env, capture_output=True, text=True
    )

    assert result.returncode == 2
    assert result.stderr.startswith("status: argument --format: invalid choice: 'yaml'")
    assert result.stderr.endswith("(see --help)\n") and result.stderr.count("\n") == 1
