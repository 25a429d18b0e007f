"""Shared fixtures: real data on disk and helpers that run the trainer's commands as processes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

TRAINER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TRAINER_DIR not in sys.path:
    sys.path.insert(0, TRAINER_DIR)

from horovod_trainer import local_launch, manifest, sharding  # noqa: E402
from horovod_trainer.checkpoints import CheckpointStore  # noqa: E402

# A bound for every child process, so that a hang fails the test instead of the whole run.
PROCESS_TIMEOUT = 300
# Shard count of the test data: 5 train shards of 287-288 samples do not line up with any world size
# used below, so rank blocks start and end in the middle of files.
SHARDS = 5


def child_env(extra=None):
    env = {key: value for key, value in local_launch.local_env().items() if not key.startswith("TRAINER_")}
    env.update(extra or {})
    return env


def flags(**values):
    """flags(data_dir="d", epochs=2, elastic=True) -> ["--data-dir", "d", "--epochs", "2", "--elastic"]"""
    args = []
    for name, value in values.items():
        args.append("--" + name.replace("_", "-"))
        if value is not True:
            args.append(str(value))
    return args


def run_module(module, args, env=None, timeout=PROCESS_TIMEOUT):
    """`python -m horovod_trainer.<module> args` in one process; returns the CompletedProcess."""
    return subprocess.run(
        local_launch.module_command(module, args),
        cwd=TRAINER_DIR,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def horovodrun_command(num_proc, args, launcher_args=(), local_hosts=True):
    return local_launch.horovodrun_command(num_proc, "train", args, launcher_args, local_hosts)


def run_horovod(num_proc, args, launcher_args=(), timeout=PROCESS_TIMEOUT):
    completed = subprocess.run(
        horovodrun_command(num_proc, args, launcher_args),
        cwd=TRAINER_DIR,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stdout[-4000:]
    return completed.stdout


def start_group(command, output=subprocess.PIPE):
    """Start `command` in its own process group, so that a test can SIGKILL all of it at once."""
    return subprocess.Popen(
        command,
        cwd=TRAINER_DIR,
        env=child_env(),
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def kill_group(process):
    """SIGKILL the process group and wait until none of it is left: a rank that was inside a system call (the
    rename that publishes a checkpoint) finishes that call before it dies, after horovodrun itself is reaped."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def wait_for_first_checkpoint(process, checkpoint_dir):
    """Poll until a complete checkpoint exists (temporary ones do not count); return it."""
    store = CheckpointStore(checkpoint_dir)
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while store.latest() is None:
        assert process.poll() is None, "training ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    return store.latest()


def rank_lines(output, rank, stream="stdout"):
    """Lines that horovodrun tagged as coming from `rank`'s stdout or stderr."""
    prefix = f"[{rank}]<{stream}>:"
    return [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("data"))
    completed = run_module("prepare_data", ["--out-dir", out, "--shards", str(SHARDS)])
    assert completed.returncode == 0, completed.stderr
    return out


@pytest.fixture(scope="session")
def data(data_dir):
    return manifest.load(data_dir)


def steps_per_epoch(data, world_size, batch_size):
    return sharding.steps_per_epoch(data.num_samples("train"), world_size, batch_size)


# The synthetic ImageNet-layout set of the tests: 4 classes (chance is 0.25), 3 shards per split.
IMAGENET_CLASSES = 4
IMAGENET_SHARDS = 3


@pytest.fixture(scope="session")
def imagenet_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("imagenet"))
    completed = run_module(
        "prepare_data",
        flags(out_dir=out, format="imagenet", images=640, classes=IMAGENET_CLASSES, shards=IMAGENET_SHARDS),
    )
    assert completed.returncode == 0, completed.stderr
    return out


@pytest.fixture(scope="session")
def imagenet(imagenet_dir):
    return manifest.load(imagenet_dir)
