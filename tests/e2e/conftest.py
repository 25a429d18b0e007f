"""The loop runs once per session (it takes minutes): `loop` is the running Loop, its processes ended at the end.

These tests run only with GITOPS_E2E=1 (`make e2e` sets it), so the template's own suite (`pytest tests`) skips
them. Settings: E2E_PROJECT (a baked, committed repository to serve instead of a fresh bake), E2E_ENV (the
environment, prod by default), E2E_TIMEOUT (seconds for everything to turn Ready, 600 by default), E2E_WORK (the
folder of the run's logs and copies, kept; by default tests/e2e/.work/<time>).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .loop import Loop

HERE = Path(__file__).resolve().parent


# The modules in the order the loop's story goes: the reconcile, the running job, the README's commands, diff
# --live, then the merges (they change the cluster the others read).
ORDER = ("test_reconcile", "test_job", "test_readme", "test_diff_live", "test_pull_requests")


def _order(item) -> int:
    stem = Path(str(item.fspath)).stem
    return ORDER.index(stem) if stem in ORDER else len(ORDER)


def pytest_collection_modifyitems(config, items):
    ours = [item for item in items if HERE in Path(str(item.fspath)).resolve().parents]
    if ours:
        others = [item for item in items if item not in ours]
        items[:] = others + sorted(ours, key=_order)  # sorted is stable: file order within a module
    if os.environ.get("GITOPS_E2E") == "1":
        return
    skip = pytest.mark.skip(reason="the GitOps loop runs with GITOPS_E2E=1 (make e2e)")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def loop():
    work = Path(os.environ.get("E2E_WORK") or HERE / ".work" / time.strftime("%Y%m%d-%H%M%S"))
    running = Loop(env=os.environ.get("E2E_ENV", "prod"), work=work)
    try:
        running.run(timeout=float(os.environ.get("E2E_TIMEOUT", "600")))
        yield running
    finally:
        report = {
            "timings": running.timings,
            "readyAfterBootstrap": running.ready_at,
            "readyHistory": running.history,
            "notes": running.notes,
        }
        try:
            report["flux"] = running.flux_summary().splitlines() if running.cluster else []
            report["workloads"] = running.workload_summary() if running.cluster else []
        except Exception as error:  # the summary is for the reader; a plane that is gone must not hide the result
            report["flux"] = [f"(no summary: {error})"]
        (work / "report.json").write_text(json.dumps(report, indent=2))
        running.stop()
