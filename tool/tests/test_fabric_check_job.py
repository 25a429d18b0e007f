"""The nccl-tests job's pass or fail is decided by the command the rendered MPIJob runs (issue 26, point 4).

`scripts/new-job --kind nccl-tests` writes the job; `scripts/render` renders the environment; the launcher's
command, taken from the rendered job, runs here with bash as the launcher container would, with `mpirun` stood in by
a script that prints a recorded all_reduce_perf output (trainer/tests/nccl_tests_output/, written from nccl-tests
v2.19.6's printf formats) and the fabric check from the repository's own trainer/ on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_repository

from eks_gpu_gitops.facts import catalog, nccl_tests
from eks_gpu_gitops.generate.job import fabric_floor

# The default bake: prod has 2 x p4d.24xlarge with EFA, whose floor is p4de's (facts/nccl_tests.py).
JOBS = {
    "fabric": [],  # every GPU node (2) of prod, whole nodes on EFA: the published floor
    "fabric-floor": ["--floor", "80"],
    "fabric-one": ["--workers", "1"],  # one node: no floor, the check reports the measurement
}
RECORDED = REPO / "trainer" / "tests" / "nccl_tests_output"
PASS_LINE = "fabric-check: PASS all_reduce busbw 76.86 GB/s at 1073741824 B >= floor 60 GB/s (p4d.24xlarge)"


def script(repo: Path, verb: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(repo / "scripts" / verb), *args], cwd=repo, env={**os.environ}, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the baked repository with the JOBS added by new-job."""
    root = copy_repository(tmp_path_factory.mktemp("fabric") / "repo")
    for name, args in JOBS.items():
        result = script(root, "new-job", name, "--env", "prod", "--kind", "nccl-tests", *args)
        assert result.returncode == 0, result.stderr
    return root


@pytest.fixture(scope="module")
def launchers(repo, tmp_path_factory) -> dict[str, list[str]]:
    """The launcher's command line of each job, from the rendered environment."""
    out = tmp_path_factory.mktemp("rendered")
    result = script(repo, "render", "--env", "prod", "--out", str(out))
    assert result.returncode == 0, result.stderr
    found = {}
    for doc in yaml.safe_load_all((out / "prod" / "training.yaml").read_text()):
        if doc and doc["kind"] == "MPIJob" and doc["metadata"]["name"] in JOBS:
            [container] = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
            found[doc["metadata"]["name"]] = [*container["command"], *container.get("args", [])]
    assert set(found) == set(JOBS)
    return found


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> Path:
    """A folder for PATH: `mpirun` prints the recording $NCCL_TESTS_OUTPUT, records its arguments in $MPIRUN_ARGS
    and exits with $MPIRUN_STATUS; `python` is this interpreter (the image has `python`)."""
    folder = tmp_path_factory.mktemp("bin")
    mpirun = folder / "mpirun"
    mpirun.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$MPIRUN_ARGS"\ncat "$NCCL_TESTS_OUTPUT"\nexit "${MPIRUN_STATUS:-0}"\n'
    )
    mpirun.chmod(0o755)
    (folder / "python").symlink_to(sys.executable)
    return folder


def run_launcher(command, repo, stand_ins, tmp_path, recording, mpirun_status=0):
    """The launcher command as the container runs it: bash from PATH, the repository's trainer/ importable."""
    arguments = tmp_path / "mpirun-args"
    completed = subprocess.run(
        command,
        env={
            "PATH": f"{stand_ins}:/usr/bin:/bin",
            "PYTHONPATH": str(repo / "trainer"),
            "NCCL_TESTS_OUTPUT": str(RECORDED / recording),
            "MPIRUN_ARGS": str(arguments),
            "MPIRUN_STATUS": str(mpirun_status),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    return completed, arguments.read_text().splitlines()


def last_line(completed) -> str:
    return completed.stdout.splitlines()[-1]


def test_the_launcher_is_bash_with_pipefail_running_mpirun_into_the_check(launchers):
    command = launchers["fabric"]
    assert command[:4] == ["bash", "-o", "pipefail", "-c"] and len(command) == 5


def test_a_healthy_run_passes_and_mpirun_runs_all_reduce_perf_on_every_gpu(launchers, repo, stand_ins, tmp_path):
    completed, arguments = run_launcher(launchers["fabric"], repo, stand_ins, tmp_path, "healthy.txt")
    assert completed.returncode == 0, completed.stderr
    assert last_line(completed) == PASS_LINE
    # The table is in the log, line for line, before the verdict.
    assert completed.stdout == (RECORDED / "healthy.txt").read_text() + PASS_LINE + "\n"
    assert arguments[arguments.index("-np") + 1] == "16"
    program = arguments.index("/opt/nccl-tests/build/all_reduce_perf")
    assert arguments[program + 1 :] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1", "-n", "20"]


def test_a_slow_fabric_fails_the_job(launchers, repo, stand_ins, tmp_path):
    completed, _ = run_launcher(launchers["fabric"], repo, stand_ins, tmp_path, "slow.txt")
    assert completed.returncode == 1
    assert last_line(completed) == (
        "fabric-check: FAIL all_reduce busbw 30.74 GB/s at 1073741824 B < floor 60 GB/s (p4d.24xlarge)"
    )


def test_a_run_that_ends_before_1_gib_fails_the_job(launchers, repo, stand_ins, tmp_path):
    completed, _ = run_launcher(launchers["fabric"], repo, stand_ins, tmp_path, "ended-early.txt", mpirun_status=1)
    assert completed.returncode == 1
    assert last_line(completed) == (
        "fabric-check: FAIL all_reduce: no result at 1073741824 B: the run ended before that size "
        "(its last row is 536870912 B)"
    )


def test_mpirun_failing_fails_the_job_even_when_the_check_passes(launchers, repo, stand_ins, tmp_path):
    completed, _ = run_launcher(launchers["fabric"], repo, stand_ins, tmp_path, "healthy.txt", mpirun_status=3)
    assert completed.returncode == 3 and last_line(completed) == PASS_LINE


def test_floor_sets_the_pass_mark(launchers, repo, stand_ins, tmp_path):
    completed, _ = run_launcher(launchers["fabric-floor"], repo, stand_ins, tmp_path, "healthy.txt")
    assert completed.returncode == 1
    assert last_line(completed) == (
        "fabric-check: FAIL all_reduce busbw 76.86 GB/s at 1073741824 B < floor 80 GB/s (p4d.24xlarge)"
    )


def test_one_node_has_no_floor_and_reports_the_measurement(launchers, repo, stand_ins, tmp_path):
    completed, arguments = run_launcher(launchers["fabric-one"], repo, stand_ins, tmp_path, "slow.txt")
    assert completed.returncode == 0
    assert last_line(completed) == (
        "fabric-check: MEASURED all_reduce busbw 30.74 GB/s at 1073741824 B (no floor; --floor sets one) (p4d.24xlarge)"
    )
    assert arguments[arguments.index("-np") + 1] == "8"


def test_every_floor_is_an_efa_type_of_the_catalogue_and_names_its_source():
    assert set(nccl_tests.FLOORS) == {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"}
    for name, floor in nccl_tests.FLOORS.items():
        instance = catalog.lookup(name)
        assert instance is not None and instance.has_efa and instance.gpus == 8, name
        assert nccl_tests.PUBLISHED_RESULTS in floor.source, name
    # 80% of the published 1 GiB figure, down to a multiple of 10 GB/s.
    assert nccl_tests.floor_of(76.79) == 60 and nccl_tests.floor_of(313.29) == 250 and nccl_tests.floor_of(75) == 60
    assert {nccl_tests.floor_for(name).gbps for name in ("p4d.24xlarge", "p4de.24xlarge")} == {60}
    assert {nccl_tests.floor_for(name).gbps for name in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge")} == {250}
    assert nccl_tests.floor_for("g5.48xlarge") is None


def test_the_two_node_floors_apply_to_two_nodes_only():
    """With n > 2 nodes each sends about 2(n-1)/n of the data out, which holds busbw near the network's rate:
    p4d's 4 x 100 Gbps (50 GB/s) is below its two-node floor, so a healthy 4-node run would fail it."""
    pair, four = fabric_floor(2, True, "p4d.24xlarge", None), fabric_floor(4, True, "p4d.24xlarge", None)

    assert pair.gbps == 60
    assert four.gbps is None
    assert four.source == "the published figures are for 2 nodes, not 4; --workers 2 tests a pair against them"
    assert fabric_floor(4, True, "p4d.24xlarge", 35.0).gbps == 35.0
