"""Build hook: the Go helper (helper/, eks-gpu-gitops-helper) goes into every wheel, built for the wheel's platform.

The wheel is then a platform wheel (`py3-none-<platform>`): the helper is a static Go binary
(CGO_ENABLED=0), so it depends on no C library and one wheel serves every Python 3 of that platform.

    EKS_GPU_GITOPS_PLATFORM=linux-arm64 pip wheel --no-deps -w dist tool   # another platform (cross-built)

Without Go, a build from source (an sdist, or a platform with no wheel) makes a wheel without the helper
and says so: the tool then renders with a kustomize or kubectl process per build. An editable install
builds nothing; `make` in the template builds the helper into the source tree for it.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HELPER = "eks-gpu-gitops-helper"
# Platform (GOOS-GOARCH) -> wheel platform tags. A static binary runs on any glibc or musl Linux.
PLATFORMS = {
    "linux-amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
    "linux-arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
    "darwin-arm64": "macosx_11_0_arm64",
    "darwin-amd64": "macosx_10_12_x86_64",
}
PLATFORM_VARIABLE = "EKS_GPU_GITOPS_PLATFORM"
_MACHINES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def this_platform() -> str:
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform, sys.platform)
    return f"{system}-{_MACHINES.get(platform.machine().lower(), platform.machine().lower())}"


class HelperBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        asked = os.environ.get(PLATFORM_VARIABLE)
        if asked and asked not in PLATFORMS:
            raise ValueError(f"{PLATFORM_VARIABLE}={asked}: no wheel is made for it; one of {', '.join(PLATFORMS)}")
        target = asked or this_platform()
        build_data["pure_python"] = False
        if target in PLATFORMS:
            build_data["tag"] = f"py3-none-{PLATFORMS[target]}"
        else:  # a source install elsewhere (ppc64le, FreeBSD...): this interpreter's own tag, Go's own target
            build_data["infer_tag"] = True
        go = shutil.which("go")
        if go is None:
            self.app.display_warning(
                f"eks-gpu-gitops: Go is not installed, so this wheel has no {HELPER}; "
                "its verbs that render (render, validate, diff, the generators) will refuse to run"
            )
            return
        self._output = Path(tempfile.mkdtemp(prefix="eks-gpu-gitops-helper-"))
        binary = self._output / HELPER
        environment = {**os.environ, "CGO_ENABLED": "0"}
        if target in PLATFORMS:
            environment["GOOS"], environment["GOARCH"] = target.split("-")
        self.app.display_info(f"eks-gpu-gitops: building {HELPER} for {target} with Go")
        subprocess.run(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(binary), "."],
            cwd=Path(self.root) / "helper",
            env=environment,
            check=True,
        )
        build_data["force_include"][str(binary)] = f"eks_gpu_gitops/_helper/{HELPER}"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        output = getattr(self, "_output", None)
        if output is not None:
            shutil.rmtree(output, ignore_errors=True)
