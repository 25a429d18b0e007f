"""Hostile input, accepted nonsense (the hardening issue's `new-job --image 'bad image $(id)'` and `new-environment
--nodes 1000000000`): every generator option is checked before anything is written, and refused in one line that
names the option and the rule (exit 2) with every file of the repository as it was; `validate` finds the same
nonsense written by hand, as a pull request can. The bounds and the grammar are facts/limits.py's, the checks
generate/answers.py's (the template's pre-generation hook runs the same ones)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, TEMPLATE, git
from test_cli import environment, one_line, tool

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.facts import limits
from eks_gpu_gitops.generate import answers
from eks_gpu_gitops.generate.files import write_all

# What the baked repository's environments are: dev is 2 x g5.xlarge (1 GPU each), prod 2 x p4d.24xlarge (8 each).
DEV, PROD = "dev", "prod"


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every file of the repository outside .git, with its bytes (symbolic links as their target)."""
    files = {}
    for path in sorted(repo.rglob("*")):
        relative = path.relative_to(repo)
        if relative.parts[0] == ".git":
            continue
        if path.is_symlink():
            files[str(relative)] = os.readlink(path).encode()
        elif path.is_file():
            files[str(relative)] = path.read_bytes()
    return files


def refused_untouched(repo: Path, verb: str, args: list[str]) -> str:
    """Run a generator that must refuse: exit 2, one line, every file as it was; the line, without the verb."""
    before = snapshot(repo)
    line = one_line(tool(repo, verb, *args), verb)
    assert snapshot(repo) == before
    assert git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
    return line


# --- the grammar ----------------------------------------------------------------------------------------------

# What github.com/distribution/reference v0.6.0's ParseNormalizedNamed (with go-digest v1.0.0, sha256 and sha512
# linked, as in the kubelet) says of each reference, run through the Go module: True when it parses. facts/limits.py
# agreed with it on these and on 35,000 random and mutated references.
GO_SAYS = {
    "ubuntu": True,
    "ubuntu:22.04": True,
    "index.docker.io/foo": True,
    "Foo/bar": True,  # an uppercase first component is taken as a registry host
    "GHCR.io/org/x:1": True,
    "localhost:5000/x": True,
    "[::1]:5000/x:1": True,
    "ex_ample.com/x": True,  # not a host (underscore): the whole is read as a repository path
    "x__y": True,
    "x--y": True,
    "x:_1": True,
    "x@sha256:" + "a" * 64: True,
    "x:1@sha256:" + "a" * 64: True,
    "x:" + "a" * 128: True,
    "a/" + "b" * 253: True,
    "ghcr.io/org/trainer:0.1.0": True,
    "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:0.1.0": True,
    "ghcr.io/Org/x:1": False,
    "bad image $(id)": False,
    "x:1\n": False,
    " x": False,
    "a" * 64: False,
    "x@sha256:" + "A" * 64: False,
    "x@md5:" + "a" * 32: False,
    "x@sha256:" + "a" * 63: False,
    "x:" + "a" * 129: False,
    "a/" + "b" * 254: False,
    "x___y": False,
    "x..y": False,
    "x:-1": False,
    "x:": False,
    "x//y": False,
    "ghcr.io/o/x;id": False,
    "$(id)": False,
    "ghcr.io/o/x:${TAG}": False,
    "x\u200b": False,
    "a:b/c": False,
    "": False,
}


@pytest.mark.parametrize("image, parses", GO_SAYS.items(), ids=[repr(i)[:40] for i in GO_SAYS])
def test_image_references_parse_as_the_kubelet_parses_them(image, parses):
    reference, problem = limits.parse_image(image)
    assert (reference is not None) is parses, problem
    assert (problem is None) is parses


# --- new-job ------------------------------------------------------------------------------------------------

JOB = ["x", "--env", DEV, "--workers", "1"]
IMAGE_FIX = (
    "use [registry/]repository[:tag][@sha256:digest] with a lowercase repository, e.g. ghcr.io/org/trainer:0.1.0"
)

NEW_JOB = {
    # (arguments, the option the line names, what it says)
    "image-with-a-shell-command": (
        [*JOB, "--image", "bad image $(id)"],
        "--image",
        f"'bad image $(id)' is not an image reference (invalid reference format); {IMAGE_FIX}",
    ),
    "image-with-a-newline": ([*JOB, "--image", "ghcr.io/org/x:1\nkind: Secret"], "--image", "not one line"),
    "image-with-an-uppercase-repository": (
        [*JOB, "--image", "ghcr.io/Example-Org/trainer:0.1.0"],
        "--image",
        "(repository name Example-Org/trainer must be lowercase)",
    ),
    "image-with-shell-metacharacters": ([*JOB, "--image", "ghcr.io/org/x:1;id"], "--image", "invalid reference"),
    "image-with-backquotes": ([*JOB, "--image", "ghcr.io/org/`id`"], "--image", "invalid reference"),
    "image-with-a-short-digest": (
        [*JOB, "--image", "ghcr.io/org/x@sha256:" + "a" * 63],
        "--image",
        "invalid checksum digest length",
    ),
    "image-with-an-unknown-digest": ([*JOB, "--image", "ghcr.io/org/x@md5:" + "a" * 32], "--image", "md5"),
    "image-with-a-tag-too-long": ([*JOB, "--image", "ghcr.io/org/x:" + "1" * 129], "--image", "invalid reference"),
    "image-empty": ([*JOB, "--image", ""], "--image", "invalid reference format"),
    "image-that-is-an-id": ([*JOB, "--image", "a" * 64], "--image", "image id, not a name"),
    "image-with-a-bidi-override": ([*JOB, "--image", "ghcr.io/org/x:1\u202e"], "--image", "not one line"),
    "name-with-uppercase": (["Resnet", *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    "name-with-dots": (["res.net", *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    "name-with-an-underscore": (["res_net", *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    "name-starting-with-a-digit": (["1job", *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    "name-too-long": (["a" * 64, *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    "name-with-a-newline": (["job\n", *JOB[1:]], "NAME", "not one line"),
    "name-that-is-a-path": (["../../etc/passwd", *JOB[1:]], "NAME", "is not a DNS-1035 label"),
    # <name>-worker-1, the last worker's host name, would be 64 characters.
    "name-too-long-for-the-worker-host-names": (
        ["a" * 55, "--env", DEV, "--workers", "2"],
        "NAME",
        "makes the last worker's host name " + "a" * 55 + "-worker-1 longer than 63 characters; use at most 54",
    ),
    "env-with-a-newline": (["x", "--env", "dev\n", "--workers", "1"], "--env", "not one line"),
    "workers-zero": (["x", "--env", DEV, "--workers", "0"], "--workers", "'0' is less than 1"),
    "workers-negative": (["x", "--env", DEV, "--workers=-1"], "--workers", "'-1' is less than 1"),
    "workers-a-billion": (
        ["x", "--env", DEV, "--workers", "1000000000"],
        "--workers",
        "'1000000000' is more than 2, what dev's gpu node group holds at maxSize (2 x g5.xlarge, 1 worker(s) of "
        "1 GPU each); give a number of workers, 1 to 2",
    ),
    "workers-in-words": (["x", "--env", DEV, "--workers", "two"], "--workers", "is not a whole number"),
    "workers-in-exponent-form": (["x", "--env", DEV, "--workers", "1e3"], "--workers", "is not a whole number"),
    "workers-with-an-underscore": (["x", "--env", DEV, "--workers", "1_0"], "--workers", "is not a whole number"),
    "workers-in-another-script": (["x", "--env", DEV, "--workers", "\u0662"], "--workers", "is not a whole number"),
    "workers-empty": (["x", "--env", DEV, "--workers", ""], "--workers", "is not a whole number"),
    "workers-with-a-newline": (["x", "--env", DEV, "--workers", "1\n"], "--workers", "not one line"),
    "gpus-per-worker-zero": ([*JOB, "--gpus-per-worker", "0"], "--gpus-per-worker", "'0' is less than 1"),
    "gpus-per-worker-more-than-a-node": (
        [*JOB, "--gpus-per-worker", "2"],
        "--gpus-per-worker",
        "'2' is more than 1, the GPUs of one g5.xlarge node; give a number of GPUs, 1 to 1",
    ),
    "gpus-per-worker-more-than-a-p4d": (
        ["x", "--env", PROD, "--workers", "1", "--gpus-per-worker", "16"],
        "--gpus-per-worker",
        "'16' is more than 8, the GPUs of one p4d.24xlarge node",
    ),
    "gpus-per-worker-in-words": ([*JOB, "--gpus-per-worker", "all"], "--gpus-per-worker", "is not a whole number"),
    "data-dir-outside-fsx": ([*JOB, "--data-dir", "/etc"], "--data-dir", "'/etc' is not a folder inside /fsx"),
    "data-dir-climbing-out-of-fsx": ([*JOB, "--data-dir", "/fsx/../etc"], "--data-dir", "is not a folder inside"),
    "data-dir-relative": ([*JOB, "--data-dir", "fsx/data"], "--data-dir", "is not a folder inside /fsx"),
    "data-dir-with-a-newline": ([*JOB, "--data-dir", "/fsx/a\n- --evil"], "--data-dir", "not one line"),
    "trainer-flag-with-a-newline": ([*JOB, "--epochs", "3\n"], "--epochs", "not one line"),
    "trainer-flag-with-an-escape-sequence": ([*JOB, "--model", "mlp\x1b[2J"], "--model", "not one line"),
}


@pytest.mark.parametrize("args, option, says", NEW_JOB.values(), ids=NEW_JOB.keys())
def test_new_job_refuses_nonsense_naming_the_option_and_writes_nothing(repo, args, option, says):
    line = refused_untouched(repo, "new-job", args)
    assert line.startswith(f"{option}: "), line
    assert says in line, line
    assert "; " in line, "the line says how to fix it"


# --- new-environment ----------------------------------------------------------------------------------------

ENV = ["qa", "--instance-type", "g5.xlarge", "--nodes", "1"]
QUOTA = limits.MANAGED_NODE_GROUP_NODES

NEW_ENVIRONMENT = {
    "nodes-a-billion": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", "1000000000"],
        "--nodes",
        f"'1000000000' is more than {QUOTA}, EKS's default quota of nodes per managed node group; give a number of "
        f"nodes, 1 to {QUOTA}",
    ),
    "nodes-one-above-the-quota": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", str(QUOTA + 1)],
        "--nodes",
        f"is more than {QUOTA}",
    ),
    "nodes-beyond-any-number": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", "9" * 5000],
        "--nodes",
        "(5000 characters) is more than",
    ),
    "nodes-zero": (["qa", "--instance-type", "g5.xlarge", "--nodes", "0"], "--nodes", "'0' is less than 1"),
    "nodes-negative": (["qa", "--instance-type", "g5.xlarge", "--nodes=-3"], "--nodes", "'-3' is less than 1"),
    "nodes-in-words": (["qa", "--instance-type", "g5.xlarge", "--nodes", "many"], "--nodes", "not a whole number"),
    "nodes-with-spaces": (["qa", "--instance-type", "g5.xlarge", "--nodes", " 2"], "--nodes", "not a whole number"),
    "nodes-above-a-capacity-block": (
        [
            "qa",
            "--instance-type",
            "p5.48xlarge",
            "--nodes",
            "65",
            "--capacity-reservation",
            "cr-0123456789abcdef0",
            "--capacity-block",
        ],
        "--nodes",
        f"'65' is more than {limits.CAPACITY_BLOCK_MAX_INSTANCES}, the most instances a Capacity Block holds",
    ),
    "name-with-uppercase": (["Staging", *ENV[1:]], "NAME", "is not a DNS-1123 label"),
    "name-with-dots": (["st.aging", *ENV[1:]], "NAME", "is not a DNS-1123 label"),
    "name-too-long": (["a" * 64, *ENV[1:]], "NAME", "is not a DNS-1123 label"),
    "name-with-a-newline": (["qa\n", *ENV[1:]], "NAME", "not one line"),
    "name-that-is-a-path": (["../qa", *ENV[1:]], "NAME", "is not a DNS-1123 label"),
    "name-with-a-space": (["q a", *ENV[1:]], "NAME", "is not a DNS-1123 label"),
    "zone-with-a-newline": ([*ENV, "--availability-zone", "us-west-2a\n"], "--availability-zone", "us-west-2a\\n"),
    "region-with-a-newline": ([*ENV, "--region", "us-west-2\n"], "--region", "is not an AWS commercial region"),
    "reservation-with-a-newline": (
        [*ENV, "--capacity-reservation", "cr-0123456789abcdef0\n"],
        "--capacity-reservation",
        "is not a capacity reservation id",
    ),
    "s3-path-with-a-newline": (
        [*ENV, "--fsx-s3-import-path", "s3://bucket\nx"],
        "--fsx-s3-import-path",
        "is not an S3 path",
    ),
    "fsx-capacity-with-an-underscore": (
        [*ENV, "--fsx-capacity-gib", "1_200"],
        "--fsx-capacity-gib",
        "is not a whole number of GiB",
    ),
    "fsx-capacity-beyond-the-api": (
        [*ENV, "--fsx-capacity-gib", "2400000000000"],
        "--fsx-capacity-gib",
        f"is more than the FSx API takes ({limits.FSX_STORAGE_CAPACITY_MAX})",
    ),
    "instance-type-with-a-newline": (
        ["qa", "--instance-type", "g5.xlarge\n", "--nodes", "1"],
        "--instance-type",
        "is not a known instance type",
    ),
}


@pytest.mark.parametrize("args, option, says", NEW_ENVIRONMENT.values(), ids=NEW_ENVIRONMENT.keys())
def test_new_environment_refuses_nonsense_naming_the_option_and_writes_nothing(repo, args, option, says):
    line = refused_untouched(repo, "new-environment", args)
    assert line.startswith(f"{option}: "), line
    assert says in line, line
    assert len(line) < 400, "a long value is cut, not repeated whole"


def test_new_environment_refuses_a_cluster_name_prefix_written_by_hand(repo):
    platform = repo / "platform.yaml"
    platform.write_text(platform.read_text().replace("cluster_name_prefix: ", "cluster_name_prefix: bad prefix "))
    git(repo, "commit", "--quiet", "-am", "hand-edited prefix")
    line = refused_untouched(repo, "new-environment", ENV)
    assert line.startswith("platform.yaml: new_environment.cluster_name_prefix: 'bad prefix "), line


def test_a_link_where_the_new_environment_goes_is_taken_even_when_it_leads_nowhere(repo, tmp_path):
    (repo / "clusters" / "qa").symlink_to(tmp_path / "outside", target_is_directory=True)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "a link out")
    line = refused_untouched(repo, "new-environment", ENV)
    assert line == "NAME: environment 'qa' already exists (clusters/qa); choose another name or edit its overlays"
    assert not (tmp_path / "outside").exists()


def test_generators_never_write_through_a_link_out_of_the_repository(repo, tmp_path):
    outside = tmp_path / "README.md"
    outside.write_bytes((repo / "README.md").read_bytes())
    (repo / "README.md").unlink()
    (repo / "README.md").symlink_to(outside)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "README elsewhere")
    before = outside.read_bytes()
    line = refused_untouched(repo, "new-environment", ENV)
    assert line == "README.md: leads outside the repository; nothing was written"
    assert outside.read_bytes() == before


@pytest.mark.parametrize("path", ["../x.yaml", "/tmp/x.yaml", "clusters/../../x.yaml", "out/x.yaml"])
def test_write_all_refuses_a_path_out_of_the_repository_before_writing(tmp_path, path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "out").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(InputError, match=f"^{re.escape(path)}: leads outside the repository; nothing was written$"):
        write_all(root, {"clusters/qa/ok.yaml": "---\n", path: "---\n"})
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out", "repo"]


def test_the_hooks_answers_are_checked_by_the_same_code():
    """The template's questions take the same bounds and grammar (the hook prints the first problem)."""
    good = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    rendered = {
        "project_slug": "x",
        "cluster_name": "x",
        "availability_zone": "us-west-2a",
        "trainer_image_repository": "ghcr.io/org/trainer",
        "git_repository_url": "https://github.com/org/x",
    }
    good = {**good, **rendered}
    assert answers.check_answers(good) == []
    for change, question in [
        ({"gpu_node_count": "1000000000"}, "gpu_node_count"),
        ({"gpu_node_count": "2\n"}, "gpu_node_count"),
        ({"project_name": "Horovod\nTraining"}, "project_name"),
        ({"project_slug": "x\n"}, "project_slug"),
        ({"cluster_name": "x\n"}, "cluster_name"),
        ({"availability_zone": "us-west-2a\n"}, "availability_zone"),
        ({"gpu_capacity_reservation": "cr-0123456789abcdef0\n"}, "gpu_capacity_reservation"),
        ({"fsx_s3_import_path": "s3://bucket\n"}, "fsx_s3_import_path"),
        ({"fsx_capacity_gib": "1_200"}, "fsx_capacity_gib"),
        ({"trainer_image_repository": "ghcr.io/org/trainer\n"}, "trainer_image_repository"),
        ({"_trainer_image_tag": "0.1.0\n"}, "trainer_image_tag"),
        ({"git_repository_url": "https://github.com/org/x\n"}, "git_repository_url"),
        ({"git_repository_url": "https://github.com/org/\x1b[2Jx"}, "git_repository_url"),
        ({"git_branch": "main\n"}, "git_branch"),
    ]:
        problems = answers.check_answers({**good, **change})
        assert [p.split(":")[0] for p in problems] == [question], (change, problems)


# --- validate: the same nonsense written by hand -----------------------------------------------------------


def findings(repo: Path, env: str) -> tuple[int, list[dict]]:
    result = subprocess.run(
        [str(repo / "scripts" / "validate"), "--env", env, "--format", "json"],
        cwd=repo,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)["findings"]


def fired(found: list[dict], rule: str) -> list[tuple[str, str, str]]:
    return sorted((f["resource"], f["path"], f["severity"]) for f in found if f["rule"] == rule)


@pytest.fixture(scope="module")
def rendered_job(tmp_path_factory) -> dict:
    """dev's horovod-train as rendered: what new-job writes a new job from, so a hand-written one too."""
    out = tmp_path_factory.mktemp("rendered")
    result = subprocess.run(
        [str(REPO / "scripts" / "render"), "--env", DEV, "--out", str(out)],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    docs = yaml.safe_load_all((out / DEV / "training.yaml").read_text())
    return next(d for d in docs if d and d["kind"] == "MPIJob")


def add_job(repo: Path, job: dict) -> str:
    """Write `job` into dev's training overlay by hand and list it; its resource name."""
    folder = repo / "overlays" / DEV / "training"
    (folder / "mpijob-hand.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    kustomization["resources"].append("mpijob-hand.yaml")
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return f"MPIJob/training/{job['metadata']['name']}"


def hand_job(rendered_job: dict, name: str = "hand") -> dict:
    job = json.loads(json.dumps(rendered_job))
    job["metadata"] = {"name": name, "namespace": job["metadata"]["namespace"], "labels": job["metadata"]["labels"]}
    return job


WORKER_SPEC = "spec.mpiReplicaSpecs.Worker.template.spec"


@pytest.mark.parametrize(
    "image",
    [
        "bad image $(id)",
        "ghcr.io/org/x:1\nkind: Secret",
        "ghcr.io/Example-Org/trainer:0.1.0",
        "ghcr.io/org/x:1;id",
        "ghcr.io/org/x@sha256:" + "a" * 63,
        "",
    ],
    ids=["shell-command", "newline", "uppercase-repository", "metacharacters", "short-digest", "empty"],
)
def test_validate_finds_an_image_the_kubelet_cannot_parse(repo, rendered_job, image):
    job = hand_job(rendered_job)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = image
    resource = add_job(repo, job)
    code, found = findings(repo, DEV)
    assert code == 1
    assert fired(found, "image-reference-invalid") == [(resource, f"{WORKER_SPEC}.containers.0.image", "error")]


def test_validate_passes_the_hand_written_job_when_it_is_sound(repo, rendered_job):
    resource = add_job(repo, hand_job(rendered_job))
    code, found = findings(repo, DEV)
    assert [(f["rule"], f["resource"]) for f in found if f["severity"] == "error"] == [], found
    assert code == 0 and resource


@pytest.mark.parametrize("name", ["Resnet", "res.net", "1job", "a" * 64, "a" * 55])
def test_validate_finds_a_job_name_the_mpi_operator_refuses(repo, rendered_job, name):
    resource = add_job(repo, hand_job(rendered_job, name))  # 2 workers: <name>-worker-1
    code, found = findings(repo, DEV)
    assert code == 1
    assert fired(found, "mpijob-name-invalid") == [(resource, "metadata.name", "error")]


@pytest.mark.parametrize(
    "replicas, rule",
    [(0, "mpijob-replica-spec-invalid"), (-1, "mpijob-replica-spec-invalid"), (1_000_000_000, "queue-quota-exceeded")],
    ids=["zero", "negative", "a-billion"],
)
def test_validate_finds_worker_counts_that_cannot_run(repo, rendered_job, replicas, rule):
    job = hand_job(rendered_job)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
    resource = add_job(repo, job)
    code, found = findings(repo, DEV)
    assert code == 1
    assert [f for f in found if f["rule"] == rule and f["resource"] == resource and f["severity"] == "error"], found


def test_validate_finds_more_gpus_per_worker_than_a_node_has(repo, rendered_job):
    job = hand_job(rendered_job)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["requests"]["nvidia.com/gpu"] = worker["resources"]["limits"]["nvidia.com/gpu"] = 2
    job["spec"]["slotsPerWorker"] = 2
    resource = add_job(repo, job)
    code, found = findings(repo, DEV)
    assert code == 1
    assert fired(found, "gpu-request-exceeds-node") == [(resource, f"{WORKER_SPEC}.containers.0.resources", "error")]


def set_gpu_group(repo: Path, **sizes) -> None:
    """Edit dev's gpuNodeGroup sizes by hand, as a pull request can (settings.yaml, where new-environment writes)."""
    settings = repo / "overlays" / DEV / "settings.yaml"
    text = settings.read_text()
    for field, value in sizes.items():
        old = next(line for line in text.splitlines() if line.startswith(f"  {field}: "))
        text = text.replace(old + "\n", f"  {field}: {value}\n", 1)
    settings.write_text(text)


CLUSTER = "ClusterConfig/horovod-training-dev"
GPU_GROUP = "managedNodeGroups.1"


@pytest.mark.parametrize(
    "sizes, rule, field, severity",
    [
        ({"maxSize": 1_000_000_000}, "node-group-above-eks-quota", "maxSize", "warning"),
        ({"maxSize": QUOTA + 1}, "node-group-above-eks-quota", "maxSize", "warning"),
        ({"maxSize": 0}, "node-group-size-invalid", "maxSize", "error"),
        ({"maxSize": -3}, "node-group-size-invalid", "maxSize", "error"),
        ({"maxSize": 2**31}, "node-group-size-invalid", "maxSize", "error"),
        ({"desiredCapacity": 3}, "node-group-size-invalid", "desiredCapacity", "error"),
        ({"desiredCapacity": -1}, "node-group-size-invalid", "desiredCapacity", "error"),
    ],
    ids=["a-billion", "above-the-quota", "zero", "negative", "beyond-32-bits", "desired-above-max", "desired-negative"],
)
def test_validate_finds_node_group_sizes_eks_refuses(repo, sizes, rule, field, severity):
    set_gpu_group(repo, **sizes)
    code, found = findings(repo, DEV)
    assert fired(found, rule) == [(CLUSTER, f"{GPU_GROUP}.{field}", severity)]
    assert code == (1 if severity == "error" else code)
    other = "node-group-size-invalid" if rule == "node-group-above-eks-quota" else "node-group-above-eks-quota"
    assert fired(found, other) == []


def test_validate_passes_the_node_groups_the_generators_write(repo):
    set_gpu_group(repo, maxSize=QUOTA)
    _, found = findings(repo, DEV)
    assert fired(found, "node-group-size-invalid") == fired(found, "node-group-above-eks-quota") == []
