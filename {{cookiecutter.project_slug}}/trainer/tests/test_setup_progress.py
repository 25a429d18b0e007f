"""tools/with-progress, which keeps `make setup` talking during the long Horovod build."""

import os
import subprocess

from conftest import TRAINER_DIR

SCRIPT = os.path.join(TRAINER_DIR, "tools", "with-progress")


def run(tmp_path, command):
    log = tmp_path / "build.log"
    completed = subprocess.run(
        ["bash", SCRIPT, str(log), "setup: build", "bash", "-c", command],
        env=dict(os.environ, PROGRESS_INTERVAL="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return completed, log


def test_long_command_reports_progress_and_keeps_its_output_in_the_log(tmp_path):
    completed, log = run(tmp_path, "echo compiling gloo; sleep 3.5; echo linked")
    assert completed.returncode == 0, completed.stderr
    progress = [line for line in completed.stdout.splitlines() if "still running after" in line]
    assert len(progress) >= 2, completed.stdout
    assert "(last log line: compiling gloo)" in progress[0]
    assert completed.stdout.splitlines()[-1].startswith("setup: build: done in ")
    assert log.read_text() == "compiling gloo\nlinked\n"


def test_failure_shows_the_end_of_the_log_and_keeps_the_exit_code(tmp_path):
    completed, _ = run(tmp_path, "echo 'error: gloo needs cmake < 4'; exit 7")
    assert completed.returncode == 7
    assert "setup: build: failed with exit code 7" in completed.stderr
    assert completed.stderr.strip().endswith("error: gloo needs cmake < 4")
