"""The tool's distribution: a platform wheel per target, each carrying the Go helper built for that target (the
release workflow cross-builds them the way these tests do), and an sdist from which a source install builds the
helper with Go, or, without Go, makes a wheel without it that says so."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eks_gpu_gitops import __version__

TOOL = Path(__file__).resolve().parent.parent
HELPER = "eks_gpu_gitops/_helper/eks-gpu-gitops-helper"
TOOLCHAIN_MODULES = TOOL / "src" / "eks_gpu_gitops" / "live" / "toolchain_modules"
TIMEOUT = 1800  # seconds: a cold Go cache compiles kustomize for a new platform in a few minutes
# Platform -> (a wheel tag it carries, the helper's executable format and machine).
PLATFORMS = {
    "linux-amd64": ("manylinux_2_17_x86_64", ("ELF", 62)),
    "linux-arm64": ("manylinux_2_17_aarch64", ("ELF", 183)),
    "darwin-arm64": ("macosx_11_0_arm64", ("Mach-O", 0x0100000C)),
    "darwin-amd64": ("macosx_10_12_x86_64", ("Mach-O", 0x01000007)),
}


def need_go() -> None:
    if shutil.which("go") is None:
        if os.environ.get("GITOPS_REQUIRE_HELPER"):
            raise AssertionError("Go is needed to build the helper into wheels")
        pytest.skip("Go is not installed")


def build_wheel(source: Path, out: Path, platform: str | None = None, path: str | None = None, verbose=False):
    env = {k: v for k, v in os.environ.items() if k != "EKS_GPU_GITOPS_PLATFORM"}
    if platform:
        env["EKS_GPU_GITOPS_PLATFORM"] = platform
    if path is not None:
        env["PATH"] = path
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out)]
    command += ["--verbose"] if verbose else []
    result = subprocess.run([*command, str(source)], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [wheel] = out.glob("eks_gpu_gitops-*.whl")
    return wheel, result


def executable_format(data: bytes) -> tuple[str, int]:
    """(ELF, e_machine) or (Mach-O, cputype) from a binary's first bytes."""
    if data[:4] == b"\x7fELF":
        return "ELF", struct.unpack_from("<H", data, 18)[0]
    if data[:4] == b"\xcf\xfa\xed\xfe":  # 64-bit Mach-O, little-endian
        return "Mach-O", struct.unpack_from("<I", data, 4)[0]
    return "unknown", 0


@pytest.mark.parametrize("platform", PLATFORMS)
def test_each_platform_wheel_carries_the_helper_built_for_it(platform, tmp_path):
    need_go()
    wheel, _ = build_wheel(TOOL, tmp_path, platform)
    tag, expected = PLATFORMS[platform]
    assert wheel.name.startswith(f"eks_gpu_gitops-{__version__}-py3-none-") and tag in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(HELPER)
        assert info.external_attr >> 16 & 0o111, "the helper is not executable"
        assert executable_format(archive.read(HELPER)[:64]) == expected
        metadata = archive.read(f"eks_gpu_gitops-{__version__}.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false" in metadata
        assert [n for n in archive.namelist() if n.startswith("eks_gpu_gitops/_helper/")] == [HELPER]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    command = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(TOOL)]
    subprocess.run(command, check=True, capture_output=True, timeout=TIMEOUT)
    [archive] = out.glob("eks_gpu_gitops-*.tar.gz")
    return archive


def test_a_source_install_builds_the_helper_with_go(sdist, tmp_path):
    need_go()
    wheel, _ = build_wheel(sdist, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        assert executable_format(archive.read(HELPER)[:64])[0] in ("ELF", "Mach-O")
        # The Go modules `toolchain build` builds Kubernetes and etcd from travel in the sdist and the wheel.
        modules = {n for n in archive.namelist() if n.startswith("eks_gpu_gitops/live/toolchain_modules/")}
        shipped = {
            f"eks_gpu_gitops/live/toolchain_modules/{p.relative_to(TOOLCHAIN_MODULES).as_posix()}"
            for p in TOOLCHAIN_MODULES.rglob("*")
            if p.is_file()
        }
        assert modules == shipped and "eks_gpu_gitops/live/toolchain_modules/kubernetes/go.sum" in modules


def test_a_source_install_without_go_has_no_helper_and_says_so(sdist, tmp_path):
    without_go = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "go").exists())
    wheel, result = build_wheel(sdist, tmp_path / "wheel", path=without_go, verbose=True)
    assert "Go is not installed, so this wheel has no eks-gpu-gitops-helper" in result.stdout + result.stderr
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if "_helper" in n]
        archive.extractall(tmp_path / "installed")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from eks_gpu_gitops.cli.main import version; print(version())"
    )
    said = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "installed")], capture_output=True, text=True, timeout=60
    )
    assert said.stdout.splitlines()[0] == (
        f"eks-gpu-gitops {__version__}, renders fail: this install of eks-gpu-gitops has no helper (a source "
        "install built without Go): install a platform wheel from PyPI, or install Go and reinstall"
    )


def test_a_platform_with_no_wheel_asked_for_is_refused(tmp_path):
    env = {**os.environ, "EKS_GPU_GITOPS_PLATFORM": "plan9-mips"}
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(tmp_path)]
    result = subprocess.run([*command, str(TOOL)], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode != 0 and not list(tmp_path.glob("*.whl"))
    assert "EKS_GPU_GITOPS_PLATFORM=plan9-mips: no wheel is made for it; one of linux-amd64" in result.stderr
