"""scripts/scale on a real copy of this repository in git, run as a user runs it: every figure that follows from
the gpu node group changes together and validates clean, nothing else changes, every refusal is one line and
leaves the tree byte for byte as it was; and the README's table of environments stays what the settings say."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO as REPOSITORY
from conftest import git

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.facts import catalog
from eks_gpu_gitops.generate import answers, readme
from eks_gpu_gitops.generate.environment import EnvironmentSpec, readme_row, settings, spec_from_settings

CONFIG = ".eks-gpu-gitops.yaml"


def tool(repo: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(repo / "scripts" / name), *args], cwd=repo, env={**os.environ}, capture_output=True, text=True
    )


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)


@pytest.fixture
def user_repo(repo) -> Path:
    """The repository as a user has it: with its validate configuration (the `repo` fixture leaves it out)."""
    shutil.copy2(REPOSITORY / CONFIG, repo / CONFIG)
    commit(repo, "validate configuration")
    return repo


def tree(repo: Path) -> dict[str, str]:
    """Every file outside .git, by path, and its content's hash."""
    return {
        str(path.relative_to(repo)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(repo.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(repo).parts
    }


def refused(result: subprocess.CompletedProcess) -> str:
    """The one line of a refusal, without `scale: `."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scale: "), result.stderr
    return lines[0].removeprefix("scale: ")


def settings_of(repo: Path, env: str) -> dict:
    return yaml.safe_load((repo / "overlays" / env / "settings.yaml").read_text())


def errors_in(repo: Path, env: str) -> list[dict]:
    result = tool(repo, "validate", "--env", env, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]


def gpu_quota(document: dict) -> dict:
    flavors = document["queue"]["resourceGroups"][0]["flavors"]
    gpu = next(flavor for flavor in flavors if flavor["name"] == "gpu")
    return {resource["name"]: resource["nominalQuota"] for resource in gpu["resources"]}


def processes(document: dict) -> int:
    command = document["training"]["launcherCommand"]
    return int(command[command.index("-np") + 1])


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    assert len(before.splitlines()) == len(after.splitlines())
    return [(old, new) for old, new in zip(before.splitlines(), after.splitlines(), strict=True) if old != new]


def test_scaling_prod_from_2_to_4_nodes_changes_every_figure_that_follows_and_nothing_else(user_repo):
    path = user_repo / "overlays/prod/settings.yaml"
    before_text, before = path.read_text(), settings_of(user_repo, "prod")
    instance = catalog.INSTANCE_TYPES[before["gpuNodeGroup"]["instanceType"]]
    assert before["gpuNodeGroup"]["maxSize"] == 2

    result = tool(user_repo, "scale", "prod", "--nodes", "4")

    assert result.returncode == 0, result.stderr
    after = settings_of(user_repo, "prod")
    assert after["gpuNodeGroup"]["maxSize"] == 4
    assert gpu_quota(after) == {
        "cpu": 4 * instance.vcpus,
        "memory": f"{4 * instance.memory_gib}Gi",
        "nvidia.com/gpu": 4 * instance.gpus,
        "vpc.amazonaws.com/efa": 4 * instance.efa_interfaces,
    }
    assert after["training"]["workers"] == 4
    assert processes(after) == 4 * instance.gpus
    # The header, maxSize, the four gpu quotas, workers and -np: no other line of the file changed.
    changed = changed_lines(before_text, path.read_text())
    assert len(changed) == 8, changed
    assert changed[0][1].startswith(f"# prod: 4 x {instance.name} ")
    for document in (before, after):  # everything but the figures is as it was
        document["gpuNodeGroup"].pop("maxSize")
        document.pop("queue")
        for key in ("workers", "launcherCommand"):
            document["training"].pop(key)
    assert after == before
    row = readme.row_of((user_repo / "README.md").read_text(), "prod")
    assert f"| 4 x {instance.name} ({instance.gpus} GPUs each) |" in row
    assert sorted(git(user_repo, "status", "--porcelain").split()) == [
        "M",
        "M",
        "README.md",
        "overlays/prod/settings.yaml",
    ]
    lines = result.stdout.splitlines()
    assert "overlays/prod/settings.yaml gpuNodeGroup.maxSize: 2 -> 4" in lines
    assert (
        f"overlays/prod/settings.yaml training.launcherCommand -np: {2 * instance.gpus} -> {4 * instance.gpus}" in lines
    )
    assert sum(" -> " in line for line in lines) == 9  # the eight lines and the README's row
    assert any(line.endswith("--name gpu --nodes-max 4`") for line in lines), lines
    assert errors_in(user_repo, "prod") == []


def test_another_instance_type_changes_gpus_and_efa_per_node(user_repo):
    new = catalog.INSTANCE_TYPES["p5.48xlarge"]
    before = settings_of(user_repo, "prod")
    assert before["gpuNodeGroup"]["instanceType"] != new.name

    result = tool(user_repo, "scale", "prod", "--nodes", "3", "--instance-type", new.name)

    assert result.returncode == 0, result.stderr
    after = settings_of(user_repo, "prod")
    group, training = after["gpuNodeGroup"], after["training"]
    assert (group["instanceType"], group["maxSize"]) == (new.name, 3)
    assert group["tags"]["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == str(
        new.efa_interfaces
    )
    assert training["slotsPerWorker"] == new.gpus
    assert processes(after) == 3 * new.gpus
    for side in ("requests", "limits"):
        assert training["workerResources"][side]["nvidia.com/gpu"] == new.gpus
        assert training["workerResources"][side]["vpc.amazonaws.com/efa"] == new.efa_interfaces
    assert gpu_quota(after)["vpc.amazonaws.com/efa"] == 3 * new.efa_interfaces
    assert gpu_quota(after)["nvidia.com/gpu"] == 3 * new.gpus
    assert f"| 3 x {new.name} ({new.gpus} GPUs each) | on ({new.efa_interfaces} interfaces per node) |" in (
        readme.row_of((user_repo / "README.md").read_text(), "prod")
    )
    assert "eksctl delete nodegroup" in result.stdout  # a managed group's type cannot change in place
    assert errors_in(user_repo, "prod") == []


def test_what_the_user_added_to_the_settings_stays(user_repo):
    path = user_repo / "overlays/prod/settings.yaml"
    text = path.read_text()
    text = text.replace("  ncclDebug: WARN\n", "  # INFO while we debug the fabric\n  ncclDebug: INFO\n")
    text = text.replace("  tags:\n", "  tags:\n    team: vision\n")
    text = text.replace(
        "    - --allow-run-as-root\n", "    - --allow-run-as-root\n    - -x\n    - NCCL_SOCKET_IFNAME=^lo\n"
    )
    path.write_text(text)
    commit(user_repo, "our own settings")

    assert tool(user_repo, "scale", "prod", "--nodes", "3").returncode == 0

    after_text = path.read_text()
    after = yaml.safe_load(after_text)
    assert "  # INFO while we debug the fabric\n  ncclDebug: INFO\n" in after_text
    assert after["gpuNodeGroup"]["tags"]["team"] == "vision"
    assert "NCCL_SOCKET_IFNAME=^lo" in after["training"]["launcherCommand"]
    assert processes(after) == 3 * after["training"]["slotsPerWorker"]


def test_scaling_to_the_same_size_changes_nothing(user_repo):
    before = tree(user_repo)
    result = tool(user_repo, "scale", "prod", "--nodes", "2")
    assert result.returncode == 0, result.stderr
    assert "nothing to do" in result.stdout
    assert tree(user_repo) == before


REFUSED = {
    "zero-nodes": (["prod", "--nodes", "0"], answers.parse_node_count("0", False, "--nodes")[1]),
    "above-the-group-quota": (["prod", "--nodes", "451"], answers.parse_node_count("451", False, "--nodes")[1]),
    "not-a-number": (["prod", "--nodes", "four"], answers.parse_node_count("four", False, "--nodes")[1]),
    "unknown-type": (
        ["prod", "--nodes", "2", "--instance-type", "p9.huge"],
        answers.check_gpu_instance_type("p9.huge", "--instance-type"),
    ),
    "cpu-type": (
        ["prod", "--nodes", "2", "--instance-type", "m5.xlarge"],
        answers.check_gpu_instance_type("m5.xlarge", "--instance-type"),
    ),
    "no-efa-for-an-efa-environment": (["prod", "--nodes", "2", "--instance-type", "g5.xlarge"], None),
    "unknown-environment": (["qa", "--nodes", "2"], None),
    "not-an-environment-name": (["../prod", "--nodes", "2"], answers.check_slug("../prod", "ENV")),
    "no-nodes": (["prod"], "--nodes is required (see --help)"),
    "check-with-nodes": (
        ["prod", "--check", "--nodes", "2"],
        "--check takes no --nodes or --instance-type (see --help)",
    ),
}


@pytest.mark.parametrize("args, message", REFUSED.values(), ids=REFUSED.keys())
def test_refusals_are_one_line_and_write_nothing(user_repo, args, message):
    before = tree(user_repo)
    line = refused(tool(user_repo, "scale", *args))
    if message is not None:
        assert line == message
    assert tree(user_repo) == before


def test_an_efa_environment_keeps_an_efa_type_and_says_where_other_choices_are(user_repo):
    line = refused(tool(user_repo, "scale", "prod", "--nodes", "2", "--instance-type", "g5.xlarge"))
    assert line.startswith("--instance-type: 'g5.xlarge' has no EFA interface, and prod has EFA on;"), line
    assert "scripts/new-environment" in line


def test_a_capacity_block_holds_64_nodes_of_its_own_type(user_repo):
    created = tool(
        user_repo,
        "new-environment",
        "cb",
        "--instance-type",
        "p5.48xlarge",
        "--nodes",
        "2",
        "--capacity-reservation",
        "cr-0123456789abcdef0",
        "--capacity-block",
    )
    assert created.returncode == 0, created.stderr
    commit(user_repo, "cb")
    before = tree(user_repo)
    assert (
        refused(tool(user_repo, "scale", "cb", "--nodes", "65")) == answers.parse_node_count("65", True, "--nodes")[1]
    )
    other_type = refused(tool(user_repo, "scale", "cb", "--nodes", "2", "--instance-type", "p4d.24xlarge"))
    assert other_type.startswith(
        "--instance-type: cb's GPU nodes launch into capacity reservation cr-0123456789abcdef0"
    )
    assert tree(user_repo) == before

    result = tool(user_repo, "scale", "cb", "--nodes", "64")
    assert result.returncode == 0, result.stderr
    assert settings_of(user_repo, "cb")["gpuNodeGroup"]["maxSize"] == 64
    assert "cr-0123456789abcdef0: it must hold 64 instances" in result.stdout


def test_spot_nodes_never_run_with_efa(user_repo):
    created = tool(
        user_repo, "new-environment", "lab", "--instance-type", "g5.8xlarge", "--nodes", "2", "--spot", "--no-efa"
    )
    assert created.returncode == 0, created.stderr
    assert tool(user_repo, "scale", "lab", "--nodes", "3").returncode == 0
    path = user_repo / "overlays/lab/settings.yaml"
    path.write_text(path.read_text().replace("  efaEnabled: false\n", "  efaEnabled: true\n"))
    commit(user_repo, "lab, EFA on by hand")
    before = tree(user_repo)

    assert refused(tool(user_repo, "scale", "lab", "--nodes", "2")) == answers.check_spot("lab", True, "")
    assert tree(user_repo) == before


def test_a_job_larger_than_the_new_size_is_refused_by_validate(user_repo):
    assert tool(user_repo, "scale", "prod", "--nodes", "4").returncode == 0
    added = tool(user_repo, "new-job", "big", "--env", "prod", "--workers", "3")
    assert added.returncode == 0, added.stderr
    commit(user_repo, "prod at 4 nodes, a 3-worker job")
    before = tree(user_repo)

    line = refused(tool(user_repo, "scale", "prod", "--nodes", "2"))

    assert line.startswith("validate would refuse the change: overlays/prod/training/mpijob-big.yaml:"), line
    assert "gpu-capacity-exceeded" in line and line.endswith("; nothing was written")
    assert tree(user_repo) == before
    assert tool(user_repo, "scale", "prod", "--nodes", "3").returncode == 0  # the job fits 3 nodes


def test_the_repositorys_validate_configuration_decides(user_repo):
    assert tool(user_repo, "scale", "prod", "--nodes", "4").returncode == 0
    assert tool(user_repo, "new-job", "big", "--env", "prod", "--workers", "3").returncode == 0
    (user_repo / CONFIG).write_text("rules:\n  gpu-capacity-exceeded: warning\n  queue-quota-exceeded: warning\n")
    commit(user_repo, "the job may wait")

    result = tool(user_repo, "scale", "prod", "--nodes", "2")

    assert result.returncode == 0, result.stderr
    assert settings_of(user_repo, "prod")["gpuNodeGroup"]["maxSize"] == 2


def test_check_fails_on_a_hand_edit_that_leaves_the_readme_behind_and_scale_repairs_it(user_repo):
    assert tool(user_repo, "scale", "prod", "--check").returncode == 0
    path = user_repo / "overlays/prod/settings.yaml"
    path.write_text(path.read_text().replace("  maxSize: 2\n", "  maxSize: 3\n"))

    stale = tool(user_repo, "scale", "prod", "--check")

    assert stale.returncode == 1, stale.stderr
    assert "`scripts/scale prod --nodes 3`" in stale.stderr and "README.md" in stale.stderr
    assert tool(user_repo, "scale", "prod", "--nodes", "3").returncode == 0
    assert tool(user_repo, "scale", "prod", "--check").returncode == 0
    repaired = settings_of(user_repo, "prod")
    assert repaired["training"]["workers"] == 3
    assert gpu_quota(repaired)["nvidia.com/gpu"] == 3 * repaired["training"]["slotsPerWorker"]


def test_a_readme_without_its_table_is_left_alone_and_said_so(user_repo):
    path = user_repo / "README.md"
    path.write_text(path.read_text().replace(readme.END, ""))
    commit(user_repo, "no table")

    result = tool(user_repo, "scale", "dev", "--nodes", "3")

    assert result.returncode == 0, result.stderr
    assert "README.md has no table of environments (its marker comments are gone); change dev's by hand" in (
        result.stdout.splitlines()
    )
    assert git(user_repo, "status", "--porcelain").split() == ["M", "overlays/dev/settings.yaml"]
    check = tool(user_repo, "scale", "dev", "--check")
    assert check.returncode == 0 and "nothing to check" in check.stdout


# --- the pure parts ---------------------------------------------------------------------------------

SPECS = [
    EnvironmentSpec("prod", "acme", "p4d.24xlarge", 2, True, "us-west-2", "us-west-2a"),
    EnvironmentSpec(
        "dev", "acme", "g5.xlarge", 2, False, "eu-west-1", "eu-west-1b", delete_fsx_with_claim=True, spot=True
    ),
    EnvironmentSpec(
        "lab",
        "acme",
        "p5.48xlarge",
        8,
        True,
        "us-east-1",
        "us-east-1c",
        fsx_deployment_type="PERSISTENT_1",
        fsx_capacity_gib=2400,
        fsx_s3_import_path="s3://bucket/prefix",
        capacity_reservation="cr-0123456789abcdef0",
        capacity_block=True,
    ),
]


@pytest.mark.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])
def test_a_spec_reads_back_from_its_settings(spec):
    assert spec_from_settings(spec.name, settings(spec)) == spec


def test_a_settings_field_not_as_new_environment_writes_it_is_named():
    document = settings(SPECS[0])
    document["gpuNodeGroup"]["maxSize"] = "2"
    with pytest.raises(InputError, match=r"gpuNodeGroup.maxSize is '2', not a whole number"):
        spec_from_settings("prod", document)
    del document["gpuNodeGroup"]["maxSize"]
    with pytest.raises(InputError, match="gpuNodeGroup.maxSize is missing"):
        spec_from_settings("prod", document)


def test_the_readme_row_is_replaced_added_or_reported_missing():
    table = f"intro\n{readme.BEGIN}\n| h |\n| --- |\n{readme_row(SPECS[0])}\n{readme.END}\nafter\n"
    bigger = EnvironmentSpec("prod", "acme", "p4d.24xlarge", 4, True, "us-west-2", "us-west-2a")
    replaced = readme.with_row(table, "prod", readme_row(bigger))
    assert replaced == table.replace(readme_row(SPECS[0]), readme_row(bigger))
    assert readme.row_of(replaced, "prod") == readme_row(bigger)
    added = readme.with_row(table, "dev", readme_row(SPECS[1]))
    assert added == table.replace(readme.END, f"{readme_row(SPECS[1])}\n{readme.END}")
    assert readme.row_of(table, "dev") is None
    assert readme.with_row("no table here\n", "prod", readme_row(bigger)) is None


def test_shrinking_says_when_eks_takes_the_smaller_maximum(user_repo):
    result = tool(user_repo, "scale", "prod", "--nodes", "1")

    assert result.returncode == 0, result.stderr
    [hint] = [line for line in result.stdout.splitlines() if line.startswith("then the group's new maxSize")]
    assert hint.startswith("then the group's new maxSize once at most 1 nodes run (EKS refuses a maxSize below them): ")
    assert hint.endswith("--name gpu --nodes-max 1`")
