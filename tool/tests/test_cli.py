"""One command-line convention for every verb (cli/conventions.py), through a repository's scripts:
errors are `<verb>: <message>` on one line, usage and input errors exit 2, Ctrl-C exits 130 (SIGTERM 143) with
one line, and none of the ways in which the verbs once ended in a traceback does so now."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import broken_tool, git

from eks_gpu_gitops import __version__
from eks_gpu_gitops.cli import conventions as cli
from eks_gpu_gitops.render.helper import HELPER

VERBS = ("render", "validate", "diff", "new-environment", "new-job", "scale", "status", "simulate", "toolchain")


def environment(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GITOPS_DEBUG"}
    return {**env, **extra}


def tool(repo: Path, verb: str, *args: str, env: dict | None = None, prefix: tuple = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, str(repo / "scripts" / verb), *args],
        cwd=repo,
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def one_line(result: subprocess.CompletedProcess, verb: str, code: int = 2) -> str:
    """The whole of stderr: one line that starts with the verb, no traceback, the exit status."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{verb}: "), lines[0]
    return lines[0].removeprefix(f"{verb}: ")


def untouched(repo: Path) -> None:
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


# --- usage --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_a_usage_error_is_one_line_and_exit_2(repo, verb):
    line = one_line(tool(repo, verb, "--no-such-option"), verb)
    assert line.startswith("unrecognized arguments: --no-such-option") or "required" in line, line
    assert line.endswith("(see --help)")


@pytest.mark.parametrize("verb, args", [("new-job", ()), ("new-environment", ("qa",)), ("diff", ())])
def test_a_missing_argument_is_one_line_and_exit_2(repo, verb, args):
    assert "required" in one_line(tool(repo, verb, *args), verb)


def test_help_is_not_an_error(repo):
    result = tool(repo, "new-job", "--help")
    assert result.returncode == 0 and "usage: eks-gpu-gitops new-job" in result.stdout and result.stderr == ""


def test_an_install_without_its_dependencies_says_so_in_one_line(repo, tmp_path):
    env = environment(EKS_GPU_GITOPS=str(broken_tool(tmp_path)))
    for verb in VERBS:
        if verb == "toolchain":
            continue  # the standard library and Go only: it works without the tool's packages
        line = one_line(tool(repo, verb, env=env), verb)
        assert line.startswith("eks-gpu-gitops is missing the Python package ") and line.endswith(
            "reinstall it (in a generated repository: make setup)"
        ), line


def test_no_tool_at_all_is_one_line_naming_make_setup(repo, tmp_path):
    env = {**environment(), "EKS_GPU_GITOPS": str(tmp_path / "nothing")}
    line = one_line(tool(repo, "render", env=env), "render")
    assert line == "eks-gpu-gitops is not installed; run 'make setup' (it installs the version requirements.txt pins)"


def test_a_bug_is_one_line_unless_debugging(monkeypatch, capsys):
    def broken():
        raise KeyError("spec")

    monkeypatch.delenv("GITOPS_DEBUG", raising=False)
    assert cli.run("validate", broken) == 2
    err = capsys.readouterr().err
    assert err == "validate: internal error: KeyError: 'spec' (set GITOPS_DEBUG=1 for the traceback)\n"
    monkeypatch.setenv("GITOPS_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.run("validate", broken)


# --- the generators on input they cannot use ----------------------------------------------------------


def test_new_environment_on_an_empty_base_cluster_config(repo):
    (repo / "overlays/base/eksctl/cluster.yaml").write_text("")
    git(repo, "commit", "--quiet", "-am", "empty")
    line = one_line(
        tool(repo, "new-environment", "qa", "--instance-type", "g5.xlarge", "--nodes", "1"), "new-environment"
    )
    assert line.startswith("environment 'qa' would not render: overlays/qa/eksctl") and "nothing was written" in line
    untouched(repo)


def test_new_environment_without_a_gpu_node_group(repo):
    cluster = repo / "overlays/base/eksctl/cluster.yaml"
    text = cluster.read_text()
    cluster.write_text(text[: text.index("  # GPU workers")])
    git(repo, "commit", "--quiet", "-am", "no gpu group")
    line = one_line(
        tool(repo, "new-environment", "qa", "--instance-type", "g5.xlarge", "--nodes", "1"), "new-environment"
    )
    assert "managedNodeGroups.[name=gpu]" in line and "nothing was written" in line, line
    untouched(repo)


def read_only(paths: list[Path]) -> tuple[tuple, callable]:
    """(command prefix, undo) that make `paths` read-only for the command: a read-only bind mount in a
    private mount namespace for root (who writes whatever the permissions), the permissions otherwise."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for path in paths:
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
        return (), lambda: [p.chmod(m) for p, m in modes.items()]
    if not shutil.which("unshare"):
        pytest.skip("root writes whatever the permissions, and unshare is missing to mount read-only")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"root writes whatever the permissions, and unshare -m is refused: {probe.stderr.strip()}")
    mounts = " && ".join(f'mount --bind "{p}" "{p}" && mount -o remount,bind,ro "{p}"' for p in paths)
    return ("unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh"), lambda: None


def test_new_environment_in_a_read_only_checkout(repo):
    prefix, undo = read_only([repo])
    try:
        result = tool(repo, "new-environment", "qa", "--instance-type", "g5.xlarge", "--nodes", "1", prefix=prefix)
    finally:
        undo()
    line = one_line(result, "new-environment")
    assert ": cannot write: " in line and line.endswith("; nothing was written"), line
    untouched(repo)


def test_new_job_with_a_read_only_kustomization(repo):
    kustomization = repo / "overlays/dev/training/kustomization.yaml"
    prefix, undo = read_only([kustomization])
    try:
        result = tool(repo, "new-job", "resnet", "--env", "dev", "--workers", "1", prefix=prefix)
    finally:
        undo()
    line = one_line(result, "new-job")
    assert line.startswith("overlays/dev/training/kustomization.yaml: cannot write: ") and line.endswith(
        "; nothing was written"
    ), line
    untouched(repo)


def test_new_job_follows_a_training_overlay_in_another_folder(repo):
    """The Flux Kustomization's path says where the environment's jobs live, not a fixed layout."""
    (repo / "apps/dev").mkdir(parents=True)
    git(repo, "mv", "overlays/dev/training", "apps/dev/training")
    kustomization = repo / "apps/dev/training/kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text()
        .replace("../../base/", "../../../overlays/base/")
        .replace("../settings.yaml", "../../../overlays/dev/settings.yaml")
    )
    entry = repo / "clusters/dev/training.yaml"
    entry.write_text(entry.read_text().replace("./overlays/dev/training", "./apps/dev/training"))
    git(repo, "commit", "--quiet", "-am", "training overlay under apps/")
    result = tool(repo, "new-job", "resnet", "--env", "dev", "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert (repo / "apps/dev/training/mpijob-resnet.yaml").is_file()
    assert "mpijob-resnet.yaml" in kustomization.read_text()


# --- render's output folder ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "out, says",
    [("/proc/x", "/proc/x: cannot write: "), ("/dev/null", "/dev/null: --out must be a folder, and this is a file")],
)
def test_render_to_a_place_it_cannot_write(repo, out, says):
    line = one_line(tool(repo, "render", "--out", out), "render")
    assert line.startswith(says), line
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_render_never_replaces_a_folder_it_did_not_write(repo):
    line = one_line(tool(repo, "render", "--out", "scripts"), "render")
    assert line == "scripts: the folder holds files render did not write; choose another --out or empty it"
    untouched(repo)
    assert tool(repo, "render", "--out", "rendered").returncode == 0
    assert tool(repo, "render", "--out", "rendered").returncode == 0  # its own output it replaces


# --- validate on what cannot be read ------------------------------------------------------------------


def test_validate_on_a_symbolic_link_loop(repo, tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert "loop.yaml: cannot read: " in one_line(tool(repo, "validate", "--quiet", str(loop)), "validate")
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "ok.yaml").write_text("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
    (folder / "loop.yaml").symlink_to(folder / "loop.yaml")
    assert "loop.yaml: cannot read: " in one_line(tool(repo, "validate", "--quiet", str(folder)), "validate")


# --- Ctrl-C -------------------------------------------------------------------------------------------


def slow_helper(folder: Path) -> dict:
    """An environment whose helper marks that it started (folder/started), then waits before it answers,
    so a signal lands while a verb works."""
    folder.mkdir()
    shim = folder / "helper"
    shim.write_text(f'#!/bin/sh\ntouch "{folder}/started"\nsleep 30\nexec "{HELPER}" "$@"\n')
    shim.chmod(0o755)
    return environment(GITOPS_HELPER=str(shim))


def wait_for(path: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


@pytest.mark.parametrize(
    "verb, args",
    [
        ("new-job", ("resnet", "--env", "dev", "--workers", "1")),
        ("new-environment", ("qa", "--instance-type", "g5.xlarge", "--nodes", "1")),
        ("render", ()),
    ],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_verb_says_so_in_one_line_and_leaves_nothing(repo, tmp_path, verb, args, signum):
    process = subprocess.Popen(
        [str(repo / "scripts" / verb), *args],
        cwd=repo,
        env=slow_helper(tmp_path / "bin"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # Once a build has started the verb is at work (its handlers set), well inside the 30 s the build waits;
    # a fixed delay instead would race the interpreter's start on a loaded machine.
    wait_for(tmp_path / "bin" / "started")
    os.killpg(process.pid, signum)  # as a terminal (or a CI runner) signals the whole process group
    out, err = process.communicate(timeout=60)
    result = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    progress = [line for line in err.splitlines() if line.startswith(f"{verb}: ") and "->" in line]
    assert not progress, err
    assert one_line(result, verb, code=128 + signum) == "interrupted"
    untouched(repo)


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"README.md": "x\n", "docs/notes.md": "x\n"}, "MANIFESTS=false\nLINTED=false\n"),
        ({"trainer/extra.py": "x = 1\n"}, "MANIFESTS=false\nLINTED=true\n"),
        ({".github/workflows/validate.yaml": "---\n"}, "MANIFESTS=true\nLINTED=true\n"),
        ({"overlays/dev/settings.yaml": "# x\n"}, "MANIFESTS=true\nLINTED=true\n"),
        ({"clusters/dev/notes.txt": "x\n"}, "MANIFESTS=true\nLINTED=false\n"),
    ],
)
def test_ci_changes_tells_ci_what_a_change_touches(repo, changed, expected):
    for name, text in changed.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.read_text() + text if path.is_file() else text)
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "change")
    result = subprocess.run([str(repo / "scripts" / "ci-changes"), "HEAD^1"], cwd=repo, capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, expected), result.stderr
    unknown = subprocess.run([str(repo / "scripts" / "ci-changes"), "no-such-ref"], cwd=repo, capture_output=True)
    assert unknown.stdout == b"MANIFESTS=true\nLINTED=true\n"


@pytest.mark.parametrize(
    "helper, said",
    [
        ("", "with its helper (kustomize-controller v1.9.5's and helm-controller v1.6.4's libraries)"),
        ("/no/such/helper", "renders fail: GITOPS_HELPER=/no/such/helper: no such executable"),
    ],
    ids=["own", "missing"],
)
def test_version_says_what_renders(helper, said):
    env = {**environment(), "GITOPS_HELPER": helper}
    result = subprocess.run(
        [sys.executable, "-m", "eks_gpu_gitops", "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stdout.splitlines()[0].startswith(f"eks-gpu-gitops {__version__}, {said}")
