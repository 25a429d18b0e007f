"""`eks-gpu-gitops toolchain`: where each binary of the local control plane and the GitOps loop is found
($GITOPS_CONTROL_PLANE_BIN, then the toolchain cache, then PATH), and their build from the Go module proxy: whole
binaries or none, instant when all are there, one line when Go is missing."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, TOOL

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.facts.flux import CONTROLLERS
from eks_gpu_gitops.facts.schemas import KUEUE
from eks_gpu_gitops.live import toolchain
from eks_gpu_gitops.live.control_plane import find_binary

NAMES = [binary.name for binary in toolchain.BINARIES]


@pytest.fixture()
def places(tmp_path, monkeypatch):
    """An empty $GITOPS_CONTROL_PLANE_BIN folder, toolchain cache and PATH folder (plus the system's, without
    these binaries), set for this process and for the commands the test runs."""
    folders = {name: tmp_path / name for name in ("bin", "cache", "path")}
    for folder in folders.values():
        folder.mkdir()
    system = [p for p in os.environ["PATH"].split(os.pathsep) if not any((Path(p) / n).exists() for n in NAMES)]
    monkeypatch.setenv(toolchain.BIN_VARIABLE, str(folders["bin"]))
    monkeypatch.setenv(toolchain.DIR_VARIABLE, str(folders["cache"]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(folders["path"]), *system]))
    return folders


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [str(TOOL), "toolchain", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env or dict(os.environ))


def rows(stdout: str) -> dict[str, str]:
    """`toolchain list`'s binary lines, by name."""
    return {line.split()[0]: line for line in stdout.splitlines() if line.split() and line.split()[0] in NAMES}


def test_the_pins_are_the_templates(places):
    """One place each: Flux's controllers from facts/flux.py, Kueue from facts/schemas.py, Kubernetes and etcd from
    the go.mod of the modules the build ships."""
    pinned = {binary.name: binary.version for binary in toolchain.BINARIES}
    assert {name: pinned[name] for name in ("source-controller", "kustomize-controller", "helm-controller")} == {
        name: CONTROLLERS[name] for name in ("source-controller", "kustomize-controller", "helm-controller")
    }
    assert pinned["kueue"] == f"v{KUEUE}"
    go_mod = (toolchain.MODULES / "kubernetes" / "go.mod").read_text()
    assert f"\tk8s.io/kubernetes {pinned['kube-apiserver']}\n" in go_mod
    assert pinned["kube-apiserver"] == pinned["kube-scheduler"] == pinned["kube-controller-manager"]


def test_list_names_every_binary_and_exits_0_when_all_are_found(places):
    for name in NAMES:
        executable(places["bin"] / name)
    result = run("list")
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    assert list(found) == NAMES
    for binary in toolchain.BINARIES:
        line = found[binary.name]
        assert line.split()[1] == binary.version and binary.what in line
        assert line.endswith(f"{places['bin'] / binary.name} ($GITOPS_CONTROL_PLANE_BIN; version not recorded)")
    assert result.stdout.splitlines()[-1] == f"all {len(NAMES)} found"


def test_list_exits_1_naming_the_missing_one_and_the_command_that_builds_it(places):
    for name in NAMES[:-1]:
        executable(places["bin"] / name)
    result = run("list")
    assert result.returncode == 1
    assert rows(result.stdout)[NAMES[-1]].endswith("  missing")
    tally, how = result.stdout.splitlines()[-2:]
    assert tally == f"1 of {len(NAMES)} missing: {NAMES[-1]}"
    assert how == f"{toolchain.BUILD_COMMAND} builds it with Go into {places['cache']}"


def test_a_generated_repository_runs_it_as_scripts_toolchain(places):
    executable(places["bin"] / "kwok")
    command = [str(REPO / "scripts" / "toolchain"), "list", "kwok", "kueue"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert rows(result.stdout)["kwok"].endswith("($GITOPS_CONTROL_PLANE_BIN; version not recorded)")
    assert rows(result.stdout)["kueue"].endswith("  missing")


def test_list_of_a_group_counts_that_group_only(places):
    for name in toolchain.GROUPS["control-plane"]:
        executable(places["bin"] / name)
    assert run("list", "control-plane").returncode == 0
    result = run("list", "controllers")
    assert result.returncode == 1
    assert list(rows(result.stdout)) == list(toolchain.GROUPS["controllers"])


def test_an_unknown_name_is_a_usage_error(places):
    result = run("list", "kubelet")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("toolchain: unknown binary 'kubelet'; one of control-plane, controllers, etcd,")


def test_the_folder_named_comes_first_then_the_cache_then_path(places):
    for folder in ("bin", "cache", "path"):
        executable(places[folder] / "kwok")
    executable(places["cache"] / "etcd")
    executable(places["path"] / "etcd")
    executable(places["path"] / "kueue")
    assert find_binary("kwok") == str(places["bin"] / "kwok")
    assert find_binary("etcd") == str(places["cache"] / "etcd")
    assert find_binary("kueue") == str(places["path"] / "kueue")
    found = rows(run("list").stdout)
    assert found["etcd"].endswith(f"{places['cache'] / 'etcd'} (the toolchain cache; version not recorded)")
    assert found["kueue"].endswith(f"{places['path'] / 'kueue'} (PATH; version not recorded)")


def test_a_recorded_version_other_than_the_pin_is_said(places):
    executable(places["cache"] / "kwok")
    (places["cache"] / toolchain.RECORD).write_text(json.dumps({"kwok": "v0.6.0"}))
    line = rows(run("list", "kwok").stdout)["kwok"]
    assert line.endswith(
        f"(the toolchain cache; built v0.6.0, `toolchain build` builds the pinned {toolchain.KWOK_VERSION})"
    )


def test_a_missing_binary_names_the_tools_command_not_the_templates_make_target(places):
    with pytest.raises(InputError) as raised:
        find_binary("kube-scheduler")
    message = str(raised.value)
    assert message.startswith(
        f"kube-scheduler not found in ${toolchain.BIN_VARIABLE} ({places['bin']}), the toolchain cache "
        f"({places['cache']}) or PATH; `scripts/toolchain build` (`eks-gpu-gitops toolchain build` outside"
    )
    assert message.endswith("kube-scheduler also comes as official release binaries: put them in a folder and set "
                            "$GITOPS_CONTROL_PLANE_BIN to it")  # fmt: skip
    assert "make control-plane" not in message
    with pytest.raises(InputError) as raised:
        find_binary("kueue")
    assert "official" not in str(raised.value)  # Kueue publishes images only


def test_build_without_go_refuses_in_one_line_and_writes_nothing(places, tmp_path):
    without_go = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "go").exists()]
    into = tmp_path / "into"
    result = run("build", "--into", str(into), "kwok", "kueue", env={**os.environ, "PATH": os.pathsep.join(without_go)})
    assert result.returncode == 2
    assert result.stderr == (
        "toolchain: Go is needed to build kwok, kueue and is not on PATH (https://go.dev/dl/); kwok also comes as "
        "official release binaries: put them in a folder and set $GITOPS_CONTROL_PLANE_BIN to it\n"
    )
    assert not into.exists()


def test_build_with_everything_there_needs_no_go_and_is_instant(places, tmp_path):
    for name in toolchain.GROUPS["controllers"]:
        executable(places["cache"] / name)
    record = {name: toolchain.BY_NAME[name].version for name in toolchain.GROUPS["controllers"]}
    (places["cache"] / toolchain.RECORD).write_text(json.dumps(record))
    began = time.monotonic()
    result = run("build", "controllers", env={**os.environ, "PATH": str(places["path"])})
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"toolchain: all 4 present in {places['cache']} at their pinned versions\n"
    assert time.monotonic() - began < 10


def need_go() -> None:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed")


def test_a_failed_build_leaves_nothing_half_written(places, monkeypatch):
    """A version the proxy does not have: the build fails, the binary already there is untouched, its record too,
    and no partial file or work folder is left."""
    need_go()
    kwok = executable(places["cache"] / "kwok")
    (places["cache"] / toolchain.RECORD).write_text(json.dumps({"kwok": "v0.6.0"}))
    bad = {
        "kwok": dataclasses.replace(toolchain.BY_NAME["kwok"], version="v0.0.0-no-such-version"),
        "mpi-operator": dataclasses.replace(toolchain.BY_NAME["mpi-operator"], version="v0.0.0-no-such-version"),
    }
    monkeypatch.setattr(toolchain, "BINARIES", tuple(bad.get(b.name, b) for b in toolchain.BINARIES))
    lines = []
    with pytest.raises(toolchain.BuildFailed) as raised:
        toolchain.build(["kwok", "mpi-operator"], progress=lines.append)
    message = str(raised.value)
    assert message.startswith("2 of 2 failed: kwok v0.0.0-no-such-version: ")
    assert "; mpi-operator v0.0.0-no-such-version: " in message
    assert sorted(p.name for p in places["cache"].iterdir()) == [".lock", toolchain.RECORD, "kwok"]
    assert kwok.read_text() == "#!/bin/sh\nexit 0\n"
    assert json.loads((places["cache"] / toolchain.RECORD).read_text()) == {"kwok": "v0.6.0"}
    assert [line.split(":")[0] for line in lines] == [
        "kwok v0.0.0-no-such-version",
        "kwok v0.0.0-no-such-version",
        "mpi-operator v0.0.0-no-such-version",
        "mpi-operator v0.0.0-no-such-version",
    ]


def test_build_makes_a_real_binary_records_it_and_a_second_run_is_instant(places, tmp_path):
    """kwok from the Go module proxy (about 10 s with a warm Go build cache, as `make test` leaves it)."""
    need_go()
    into = tmp_path / "into"
    result = run("build", "--into", str(into), "kwok")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"toolchain: kwok {toolchain.KWOK_VERSION}: building from sigs.k8s.io/kwok"
    assert lines[1].startswith(f"toolchain: kwok {toolchain.KWOK_VERSION}: built in ")
    assert lines[2].startswith(f"toolchain: built 1 into {into} (")
    assert sorted(p.name for p in into.iterdir()) == [".lock", toolchain.RECORD, "kwok"]
    assert json.loads((into / toolchain.RECORD).read_text()) == {"kwok": toolchain.KWOK_VERSION}
    version = subprocess.run([str(into / "kwok"), "--version"], capture_output=True, text=True, timeout=60)
    assert toolchain.KWOK_VERSION in version.stdout + version.stderr
    again = run("build", "--into", str(into), "kwok")
    assert again.stderr == f"toolchain: all 1 present in {into} at their pinned versions\n"


def test_a_plane_with_the_controller_manager_runs_deployments():
    """kube-controller-manager as an optional component: a Deployment gets its ReplicaSet and its pod, which only
    the controller manager makes."""
    from conftest import need_binaries
    from kubernetes import client
    from kubernetes.config import new_client_from_config

    from eks_gpu_gitops.live.control_plane import CORE, ControlPlane

    components = (*CORE, "kube-controller-manager")
    need_binaries(components)
    with ControlPlane(components=components) as plane:
        api = new_client_from_config(str(plane.kubeconfig))
        labels = {"app": "probe"}
        container = client.V1Container(name="probe", image="registry.k8s.io/pause:3.10")
        deployment = client.V1Deployment(
            metadata=client.V1ObjectMeta(name="probe"),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels), spec=client.V1PodSpec(containers=[container])
                ),
            ),
        )
        client.AppsV1Api(api).create_namespaced_deployment("default", deployment)
        deadline = time.monotonic() + 60
        pods = []
        while time.monotonic() < deadline and not pods:
            pods = client.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=probe").items
            time.sleep(0.5)
        assert [pod.metadata.owner_references[0].kind for pod in pods] == ["ReplicaSet"], plane.log_tail(
            "kube-controller-manager"
        )
