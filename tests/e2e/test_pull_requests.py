"""Issue 25, point 3, day two: pull requests merged into the loopback server and what Flux, Kueue and
`scripts/status` make of them. Each merge is a module fixture, so the tests that read its outcome run after it:
1. `scripts/scale ENV --nodes 1` (the README's way: workers 2 -> 1, maxSize and quota with them), merged;
2. a second job above the new quota, merged by a user who bypasses the checks: `scripts/new-job big --workers 1`
   (what new-job accepts now), then its Worker replicas raised to 2 and mpirun's -np to 16 by hand;
3. that commit reverted (`git revert`), pushed: Flux prunes the second job.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from . import jobs, sources
from .test_job import JOB, NAMESPACE, settled_status, status_problems

BIG = "big"
APPLY_TIMEOUT = 120


def _merged(loop, commit: str, step: str) -> dict:
    started = time.monotonic()
    applied = loop.wait_for(lambda: loop.applied("training", commit), timeout=APPLY_TIMEOUT)
    loop.timings[f"{step}: pushed to training applied"] = round(time.monotonic() - started, 1)
    assert applied is not None, (
        f"Flux did not apply commit {commit[:12]} within {APPLY_TIMEOUT} s (training's lastAppliedRevision, Ready):\n"
        + loop.flux_summary()
    )
    return applied


def _checked(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode == 0, f"{what} exited {done.returncode}: {done.stdout[-1500:]} {done.stderr[-1500:]}"


@pytest.fixture(scope="module")
def scaled(loop):
    _checked(loop.script("scale", loop.env, "--nodes", "1"), f"scripts/scale {loop.env} --nodes 1")
    commit = loop.merge(f"{loop.env}: one GPU node (scripts/scale)")
    return _merged(loop, commit, "merge scale")


def _raise_workers(path, workers: int, slots: int) -> None:
    """What a user bypassing new-job and validate does: Worker replicas and mpirun's -np edited in the file."""
    text = path.read_text()
    head, worker = text.split("    Worker:\n", 1)
    assert "      replicas: 1\n" in worker, f"{path}: no `replicas: 1` under Worker to raise"
    worker = worker.replace("      replicas: 1\n", f"      replicas: {workers}\n", 1)
    np_line = f"            - -np\n            - '{slots}'\n"
    assert np_line in head, f"{path}: mpirun's -np {slots} not found"
    head = head.replace(np_line, f"            - -np\n            - '{workers * slots}'\n", 1)
    path.write_text(head + "    Worker:\n" + worker)


@pytest.fixture(scope="module")
def over_quota(loop, scaled):
    _checked(loop.script("new-job", BIG, "--env", loop.env, "--workers", "1"), f"scripts/new-job {BIG} --workers 1")
    _raise_workers(loop.clone / "overlays" / loop.env / "training" / f"mpijob-{BIG}.yaml", 2, 8)
    commit = loop.merge(f"{loop.env}: job {BIG} with 2 workers (above the queue's quota, validate bypassed)")
    return _merged(loop, commit, "merge job above quota")


@pytest.fixture(scope="module")
def reverted(loop, over_quota):
    sources.git(loop.clone, "revert", "--no-edit", "HEAD")
    return _merged(loop, loop.push(), "merge revert")


# --- 1. scale to one node -------------------------------------------------------------------------------------


def test_flux_applies_the_merged_scale(loop, scaled):
    job = jobs.mpijob(loop, NAMESPACE, JOB)
    assert job is not None and jobs.workers_of(job) == 1, (
        f"after the merge, MPIJob {NAMESPACE}/{JOB} has {job and jobs.workers_of(job)} workers, not 1"
    )


def test_kueue_admits_the_changed_job(loop, scaled):
    admitted = loop.wait_for(
        lambda: [
            w
            for w in jobs.workloads_of(loop, NAMESPACE, JOB)
            if jobs.admitted(w) and jobs.pod_set_counts(w).get("worker") == 1
        ],
        timeout=90,
    )
    assert admitted, (
        f"no admitted Workload with 1 worker for MPIJob {NAMESPACE}/{JOB} after the merge; Workloads: "
        f"{jobs.describe_workloads(jobs.workloads_of(loop, NAMESPACE, JOB))}"
    )
    running = loop.wait_for(lambda: jobs.running_as_expected(loop, NAMESPACE, JOB, 1), timeout=90)
    assert running, (
        f"MPIJob {NAMESPACE}/{JOB} with 1 worker is not Running on its node groups: "
        f"{jobs.describe_pods(loop, jobs.pods(loop, NAMESPACE, JOB))}"
    )


def test_status_is_ok_again_after_the_scale(loop, scaled):
    loop.wait_for(lambda: jobs.running_as_expected(loop, NAMESPACE, JOB, 1), timeout=90)
    done = settled_status(loop)
    problems = status_problems(done)
    assert done.returncode == 0 and not problems, (
        f"scripts/status after the scale exited {done.returncode}:\n" + "\n".join(problems)
    )


# --- 2. a job above the quota ---------------------------------------------------------------------------------


def test_the_first_job_keeps_running(loop, over_quota):
    running = loop.wait_for(lambda: jobs.running_as_expected(loop, NAMESPACE, JOB, 1), timeout=30)
    assert running, (
        f"MPIJob {NAMESPACE}/{JOB} stopped running once {BIG} was merged: "
        f"{jobs.describe_pods(loop, jobs.pods(loop, NAMESPACE, JOB))}"
    )


def _refused(loop) -> list[dict]:
    return [
        w
        for w in jobs.workloads_of(loop, NAMESPACE, BIG)
        if jobs.condition(w, "QuotaReserved").get("status") == "False"
        and jobs.condition(w, "QuotaReserved").get("message")
    ]


def test_the_job_above_quota_stays_suspended_with_kueue_s_reason(loop, over_quota):
    refused = loop.wait_for(lambda: _refused(loop), timeout=60)
    assert refused, (
        f"MPIJob {NAMESPACE}/{BIG}: no Workload whose QuotaReserved is False with Kueue's reason; Workloads: "
        f"{jobs.describe_workloads(jobs.workloads_of(loop, NAMESPACE, BIG))}"
    )
    reserved = jobs.condition(refused[0], "QuotaReserved")
    # Kueue v0.19.2 (reason "Pending" by default): "> maximum capacity" when a pod set can never fit the queue.
    assert "> maximum capacity" in reserved.get("message", ""), (
        f"Kueue does not say the job exceeds the quota: {reserved}"
    )
    job = jobs.mpijob(loop, NAMESPACE, BIG)
    assert job["spec"].get("runPolicy", {}).get("suspend") is True, f"MPIJob {BIG} is not suspended: {job['spec']}"
    started = [p.metadata.name for p in jobs.pods(loop, NAMESPACE, BIG)]
    assert not started, f"MPIJob {BIG} has pods although Kueue did not admit it: {started}"


def test_status_reports_the_job_above_quota_with_the_fix(loop, over_quota):
    loop.wait_for(lambda: _refused(loop), timeout=60)
    done = loop.script("status", "--env", loop.env)
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"fail mpijob {NAMESPACE}/{BIG}: ")]
    assert lines, f"scripts/status has no fail line for MPIJob {NAMESPACE}/{BIG}:\n{done.stdout}\n{done.stderr}"
    assert "Suspended, never admitted by training: Kueue: " in lines[0], lines[0]
    assert "(fix: lower the job's workers" in lines[0] and "scripts/scale" in lines[0], lines[0]
    assert done.returncode == 1, f"scripts/status exited {done.returncode} with a fail line:\n{done.stdout}"


# --- 3. the revert ---------------------------------------------------------------------------------------------


def test_flux_prunes_the_reverted_job(loop, reverted):
    gone = loop.wait_for(lambda: jobs.mpijob(loop, NAMESPACE, BIG) is None, timeout=60)
    assert gone, f"MPIJob {NAMESPACE}/{BIG} is still on the cluster after its commit was reverted (prune: true)"
    assert jobs.mpijob(loop, NAMESPACE, JOB) is not None, f"the revert removed MPIJob {NAMESPACE}/{JOB} as well"
