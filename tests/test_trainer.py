"""The trainer's own suite (real Horovod processes) inside a baked project, run the way a user
would: `make -C trainer test`, which builds TensorFlow + Horovod into a virtual environment.
The template keeps that environment outside the template folder (TRAINER_VENV)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import TEMPLATE

PYTEST_SUMMARY = re.compile(r"^=* ?\d+ (?:passed|failed|error).*$", re.MULTILINE)


def test_trainer_suite_passes(bake_factory):
    project = bake_factory("default").path
    venv = os.environ.get("TRAINER_VENV") or str(TEMPLATE / ".venv-trainer")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    result = subprocess.run(
        ["make", "-C", str(project / "trainer"), "test", f"VENV={venv}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=5400,
    )
    # pytest reports on stdout; pip's warnings (stderr) can be long enough to hide it, so read it there.
    assert result.returncode == 0, result.stdout[-8000:] + "\n--- stderr ---\n" + result.stderr[-2000:]
    summary = PYTEST_SUMMARY.findall(result.stdout)
    assert summary, result.stdout[-6000:]
    assert " passed" in summary[-1] and " failed" not in summary[-1] and " error" not in summary[-1], summary[-1]


def test_mpijob_runs_the_trainer_entry_points(bake_factory):
    text = (bake_factory("default").path / "overlays/base/training/mpijob.yaml").read_text()
    package = Path(bake_factory("default").path / "trainer" / "horovod_trainer")
    assert "horovod_trainer.train" in text and (package / "train.py").is_file()
    assert "horovod_trainer.prepare_data" in text and (package / "prepare_data.py").is_file()
