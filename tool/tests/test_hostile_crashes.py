"""Hostile input, crashes: what Flux refuses is one line, never an internal error; a document of the wrong shape
is one line or a finding; and an interrupt at any moment ends a run with one line and 130 (Ctrl-C) or 143
(SIGTERM), never a traceback nor a lost interrupt, leaving no temporary folder, worktree or helper behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import git
from hostile import add_kustomization, last_line
from test_cli import environment, tool

from eks_gpu_gitops.render.helper import HELPER


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"images": ["x"]}, "unable to get images: unable to convert patch 0 to map[string]interface{}"),
        ({"patches": ["x"]}, "unable to get patches"),
        ({"components": [{"path": "x"}]}, "unable to get components"),
        ({"commonMetadata": {"labels": ["x"]}}, ""),
    ],
    ids=["images", "patches", "components", "commonMetadata"],
)
def test_a_spec_of_the_wrong_shape_is_one_line(repo, tmp_path, spec, says):
    add_kustomization(repo, "hostile", **spec)
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    if not says:  # Flux ignores a field it cannot read as a map: so does the render
        assert result.returncode == 0, result.stderr
        return
    said = last_line(result, "render")
    assert said.startswith("overlays/prod/training: kustomize build failed: ") and says in said, said
    assert "internal error" not in result.stderr and not (tmp_path / "out").exists()


# --- documents of the wrong shape, where the tools read them: one line or a finding, never a crash ------------


def flux(**spec) -> dict:
    """The hostile Flux Kustomization add_kustomization writes, as a document."""
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "hostile", "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "path": "./overlays/prod/training",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }


HELM_RELEASE = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease"}
CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "claim", "namespace": "training"},
    "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1200Gi"}}},
}
# (where the document goes: a Flux entry of clusters/prod, an object of prod's training overlay, or a JSON patch of
# prod's ClusterConfig; the document, or the patch's path and value)
SHAPES = {
    "spec.path a list": ("cluster", flux(path=["./overlays/prod/training"])),
    "spec.path a number": ("cluster", flux(path=5)),
    "spec.dependsOn a string": ("cluster", flux(dependsOn="infrastructure")),
    "spec.dependsOn a number": ("cluster", flux(dependsOn=5)),
    "spec.dependsOn a name that is a number": ("cluster", flux(dependsOn=[{"name": 5}])),
    "spec.postBuild a list": ("cluster", flux(postBuild=["x"])),
    "spec.postBuild.substitute a list": ("cluster", flux(postBuild={"substitute": ["x"]})),
    "spec.postBuild.substituteFrom a string": ("cluster", flux(postBuild={"substituteFrom": "cluster-settings"})),
    "spec.sourceRef a string": ("cluster", flux(sourceRef="flux-system")),
    "spec a list": ("cluster", {**flux(), "spec": ["x"]}),
    "metadata.name a number": ("cluster", {**flux(), "metadata": {"name": 5, "namespace": "flux-system"}}),
    "a document that is a list": ("cluster", ["a", "b"]),
    "a document that is a scalar": ("cluster", "just a string"),
    "a HelmRelease whose spec.chart is a string": (
        "overlay",
        {**HELM_RELEASE, "metadata": {"name": "h", "namespace": "training"}, "spec": {"interval": "1h", "chart": "x"}},
    ),
    "a HelmRelease whose spec is a string": (
        "overlay",
        {**HELM_RELEASE, "metadata": {"name": "h", "namespace": "training"}, "spec": "x"},
    ),
    "a claim whose storageClassName is a list": (
        "overlay",
        {**CLAIM, "spec": {**CLAIM["spec"], "storageClassName": ["fsx"]}},
    ),
    "a ClusterConfig whose nodeGroups is a map": ("eksctl", ("/nodeGroups", {"workers": {"instanceType": "x"}})),
    "a ClusterConfig whose managedNodeGroups is a string": ("eksctl", ("/managedNodeGroups", "gpu")),
    "a node group whose labels are a list": ("eksctl", ("/managedNodeGroups/0/labels", ["gpu"])),
    "a node group whose taints are a map": ("eksctl", ("/managedNodeGroups/0/taints", {"gpu": "true"})),
}


def place(repo: Path, where: str, what) -> None:
    if where == "cluster":
        (repo / "clusters/prod/hostile.yaml").write_text(yaml.safe_dump(what, sort_keys=False))
    elif where == "overlay":
        (repo / "overlays/prod/training/hostile.yaml").write_text(yaml.safe_dump(what, sort_keys=False))
        kustomization = repo / "overlays/prod/training/kustomization.yaml"
        doc = yaml.safe_load(kustomization.read_text())
        doc["resources"] = [*doc.get("resources", []), "hostile.yaml"]
        kustomization.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        path, value = what
        kustomization = repo / "overlays/prod/eksctl/kustomization.yaml"
        doc = yaml.safe_load(kustomization.read_text())
        patch = yaml.safe_dump([{"op": "add", "path": path, "value": value}])
        doc["patches"] = [*doc.get("patches", []), {"target": {"kind": "ClusterConfig"}, "patch": patch}]
        kustomization.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize(
    "shape",
    list(SHAPES),
)
def test_a_document_of_the_wrong_shape_is_one_line_or_a_finding(repo, tmp_path, shape):
    """render: built as Flux builds it (0), or one line (2); validate, with failing rules raising
    (GITOPS_DEBUG=1): a finding (1), or one line (2), as the API server refuses every one of them."""
    place(repo, *SHAPES[shape])
    rendered = tool(repo, "render", "--env", "prod", "--out", str(tmp_path / "out"))
    validated = tool(
        repo, "validate", "--env", "prod", "--quiet", "--format", "json", env=environment(GITOPS_DEBUG="1")
    )
    for verb, result, passing in (("render", rendered, 0), ("validate", validated, 1)):
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
        if result.returncode == 2:
            last_line(result, verb)
        else:
            assert result.returncode == passing, (verb, result.returncode, result.stdout[-2000:], result.stderr)
    if validated.returncode == 1:
        rules = {finding["rule"] for finding in json.loads(validated.stdout)["findings"]}
        assert "rule-failed" not in rules, rules


# --- interrupts: Ctrl-C (SIGINT to the process group) and SIGTERM (to the main process) at any moment -----------

# The verbs that make temporary copies: render (the workspaces, and --out's staging folder), validate (the
# workspaces), diff (a git worktree of the base, and the workspaces of both sides).
INTERRUPTED_VERBS = {
    "render": lambda out: ("--out", str(out / "rendered")),
    "validate": lambda out: (),
    "diff": lambda out: ("--base", "HEAD"),
}
# When the signal comes: as the command starts (in the shell wrappers, before any Python runs: the only moment
# a signal may end the process by itself, silently, as the shell reports it: 128 + its number); once the tool's
# signal handling is in place (at once, and a little later: while Python imports the verb's modules and copies
# the repository); while a build waits on the helper; the same with a signal every few milliseconds until the
# run ends (a second Ctrl-C during the clean-up); and during the clean-up at the end of a run that succeeded.
MOMENTS = ("start", "installed", "installed+0.02", "installed+0.05", "installed+0.1", "build", "clean-up", "end")

# A helper for one test: "stall" starts and never answers (a build waits on it until the signal), "hold" answers
# as the helper does, then holds the clean-up at the end of the run up (the pool waits for it when it closes).
SHIM = """#!{python}
import os, subprocess, sys, time
folder = {folder!r}
open(os.path.join(folder, "started-%d" % os.getpid()), "w").close()
if {mode!r} == "hold":
    subprocess.run([{helper!r}])  # answers until its input closes: the run's clean-up
    open(os.path.join(folder, "closing"), "w").close()
while True:
    time.sleep(1)
"""


def shim(folder: Path, mode: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"helper-{mode}"
    path.write_text(SHIM.format(python=sys.executable, folder=str(folder), mode=mode, helper=str(HELPER)))
    path.chmod(0o755)
    return path


def wait_until(ready, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120
    while not ready():
        assert process.poll() is None, f"the command ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"no {what} after 120 s"
        time.sleep(0.002)


def handlers_installed(pid: int) -> bool:
    """Whether the tool itself runs (not the shell scripts before it) and its handlers are set: plain Python
    catches SIGINT only, the tool SIGTERM and SIGHUP too."""
    try:
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except (OSError, ValueError):
        return False
    caught = int(status.get("SigCgt", "0"), 16)
    return status.get("Name", "").strip() == "eks-gpu-gitops" and bool(caught & (1 << (signal.SIGTERM - 1)))


def processes_in_group(group: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and int(fields[2]) == group:
                found.append((entry / "stat").read_text())
        except (OSError, IndexError, ValueError):
            continue
    return found


def processes_running(program: Path) -> list[str]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(program).encode() == part for part in command):
            found.append(entry.name)
    return found


def interrupt(repo: Path, tmp_path: Path, verb: str, signum: int, moment: str, run: int):
    """Run `verb`, signal it at `moment` (SIGINT to its process group, as a terminal's Ctrl-C; SIGTERM to its
    main process, as a CI runner's cancel), and return (exit status as a shell reports it, stdout, stderr, and
    the temporary folder, the shim's folder and the output folder)."""
    place = tmp_path / f"{moment}-{run}"
    scratch, out = place / "tmp", place / "out"
    scratch.mkdir(parents=True)
    out.mkdir()
    helper = shim(place / "bin", "hold" if moment == "end" else "stall")
    env = environment(TMPDIR=str(scratch), GITOPS_HELPER=str(helper), GITOPS_RENDER_CACHE=str(place / "cache"))
    process = subprocess.Popen(
        [str(repo / "scripts" / verb), *INTERRUPTED_VERBS[verb](out)],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def send() -> None:
        with contextlib.suppress(ProcessLookupError):
            if signum == signal.SIGINT:
                os.killpg(process.pid, signum)
            else:
                os.kill(process.pid, signum)

    if moment.startswith("installed"):
        wait_until(lambda: handlers_installed(process.pid), process, "signal handlers")
        time.sleep(float(moment.partition("+")[2] or 0))
    elif moment in ("build", "clean-up"):
        wait_until(lambda: any(place.glob("bin/started-*")), process, "helper")
        made = {p.name.rsplit("-", 1)[0] for p in scratch.iterdir()}
        assert "gitops-flux" in made and ("gitops-diff" in made) == (verb == "diff"), made  # what to clean up
    elif moment == "end":
        wait_until(lambda: (place / "bin" / "closing").exists(), process, "clean-up")
    send()
    if moment == "clean-up":  # and again, until the run ends: every later signal lands in its unwinding
        while process.poll() is None:
            send()
            time.sleep(0.005)
    stdout, stderr = process.communicate(timeout=120)
    status = 128 - process.returncode if process.returncode < 0 else process.returncode
    # The command waits for the helpers it killed; the "hold" shim's own child (the real helper, which the
    # command does not know of) is given a moment to end with it. One that stays running fails this.
    deadline = time.monotonic() + 10
    while (processes_in_group(process.pid) or processes_running(helper)) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = processes_in_group(process.pid) + processes_running(helper)
    assert not left, f"{moment}: left running: {left}"
    return status, stdout, stderr, scratch, out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("verb", list(INTERRUPTED_VERBS))
def test_an_interrupt_at_any_moment_ends_in_one_line_and_leaves_nothing(repo, tmp_path, verb, signum):
    for run, moment in enumerate(MOMENTS):
        status, stdout, stderr, scratch, out = interrupt(repo, tmp_path, verb, signum, moment, run)
        said = f"{moment}: exit status {status}, stderr:\n{stderr}"
        assert status == 128 + signum, said
        assert "Traceback" not in stderr and "Fatal Python error" not in stderr, said
        assert "internal error" not in stderr, said
        lines = stderr.strip().splitlines()
        if moment == "start" and not lines:
            pass  # the signal came before the scripts set their traps: the process ended by it, silently
        else:
            assert lines and lines[-1] == f"{verb}: interrupted" and stderr.count("interrupted") == 1, said
        assert list(scratch.iterdir()) == [], f"{moment}: left in TMPDIR: {list(scratch.iterdir())}"
        assert [p.name for p in out.iterdir() if p.name != "rendered"] == [], f"{moment}: staging left"
        if moment == "end" and verb == "render":
            assert "-> " in stdout and (out / "rendered" / "dev").is_dir(), said  # done, then interrupted
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1, moment
        assert not list((repo / ".git" / "worktrees").glob("*")), moment
        assert git(repo, "status", "--porcelain", "--untracked-files=all") == "", moment


# --- the same, one piece at a time, in a process of its own -------------------------------------------------------


def run_python(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env or environment()
    )


ENTRY = """
import os, signal, sys, time
from eks_gpu_gitops.cli import main as entry
{body}
entry._run = run
entry.main(["render"])
"""


@pytest.mark.parametrize(
    ("body", "status"),
    [
        # A verb that swallows the KeyboardInterrupt (an `except BaseException` somewhere) and succeeds.
        ("def run(args):\n    try:\n        os.kill(os.getpid(), signal.SIGINT); time.sleep(1)\n"
         "    except BaseException:\n        pass\n    return 0", 130),
        # A KeyboardInterrupt Python wraps in another exception (raised in __set_name__ as a class is made).
        ("def run(args):\n    class Field:\n        def __set_name__(self, owner, name):\n"
         "            os.kill(os.getpid(), signal.SIGTERM); time.sleep(1)\n"
         "    class Holder:\n        field = Field()\n    return 0", 143),
        # A signal that comes after the verb succeeded, as its threads and helpers are cleaned up.
        ("import atexit\natexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(0.5)))\n"
         "def run(args):\n    print('done')\n    return 0", 143),
        # Two signals: the status is the first one's.
        ("def run(args):\n    os.kill(os.getpid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGINT)\n"
         "    time.sleep(1)\n    return 0", 143),
        # The verb says it was interrupted, then the KeyboardInterrupt of a later signal leaves it anyway.
        ("def run(args):\n    try:\n        os.kill(os.getpid(), signal.SIGTERM); time.sleep(1)\n"
         "    except KeyboardInterrupt:\n        print('render: interrupted', file=sys.stderr)\n        raise", 143),
    ],
    ids=["swallowed", "wrapped", "at-exit", "two-signals", "said-then-raised"],
)  # fmt: skip
def test_an_interrupt_is_never_lost_nor_a_traceback(body, status):
    result = run_python(ENTRY.format(body=body))
    assert result.returncode == status, result.stderr
    assert result.stderr.splitlines()[-1:] == ["render: interrupted"] and "Traceback" not in result.stderr, result
    assert result.stderr.count("interrupted") == 1, result.stderr


CLOSE_TWICE_INTERRUPTED = """
import os, shutil, signal, sys, time
from pathlib import Path
from eks_gpu_gitops.core import interrupts
from eks_gpu_gitops.render.flux_build import Workspace

interrupts.install()
workspace = Workspace(Path(sys.argv[1]))
removing = shutil.rmtree


def rmtree(path, *args, **kwargs):  # a Ctrl-C, and another, halfway through the removal
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
    return removing(path, *args, **kwargs)


shutil.rmtree = rmtree
try:
    workspace.close()
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted once, after the removal")
print("left:", workspace.path.exists())
"""


def test_a_second_ctrl_c_never_cuts_a_clean_up_short(repo, tmp_path):
    result = run_python(CLOSE_TWICE_INTERRUPTED, str(repo), env=environment(TMPDIR=str(tmp_path)))
    assert result.stdout.splitlines() == ["interrupted once, after the removal", "left: False"], result
    assert "Traceback" not in result.stderr and list(tmp_path.glob("gitops-flux-*")) == []


@pytest.mark.parametrize("cut", ["after the checkout", "while git notes it"])
def test_a_worktree_cut_short_leaves_nothing(repo, tmp_path, monkeypatch, cut):
    """`git worktree add` interrupted: after it wrote the checkout, or killed while its metadata says
    "initializing" (no checkout, no gitdir file yet)."""
    import tempfile

    from eks_gpu_gitops.diff import gitrefs

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the checkout's folder is made
    real = gitrefs.git

    def git_cut_short(args, cwd):
        if "add" not in args:
            return real(args, cwd)
        tree = Path(args[-2])
        if cut == "after the checkout":
            real(args, cwd)
        else:
            noted = repo / ".git" / "worktrees" / tree.name
            noted.mkdir(parents=True)
            (noted / "locked").write_text("initializing")
        raise KeyboardInterrupt

    monkeypatch.setattr(gitrefs, "git", git_cut_short)
    with pytest.raises(KeyboardInterrupt), gitrefs.worktree(gitrefs.resolve("HEAD", repo), repo):
        pass
    assert list(scratch.iterdir()) == []
    assert not list((repo / ".git" / "worktrees").glob("*"))
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_render_out_interrupted_while_staging_keeps_the_earlier_output(repo, tmp_path, monkeypatch):
    from eks_gpu_gitops.model import Environment, FluxKustomization, Manifest
    from eks_gpu_gitops.render import output

    out = tmp_path / "out" / "rendered"
    assert tool(repo, "render", "--env", "dev", "--out", str(out)).returncode == 0
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    objects = [Manifest({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "x.yaml")]
    entries = [
        FluxKustomization(Manifest({"kind": "Kustomization", "metadata": {"name": name}}, "k.yaml"), "x", [], objects)
        for name in ("one", "two")
    ]
    written = []

    def dump(manifests):
        written.append(manifests)
        if len(written) == 2:
            raise KeyboardInterrupt  # as the second file is staged
        return "---\n"

    monkeypatch.setattr(output, "dump", dump)
    monkeypatch.chdir(repo)
    with pytest.raises(KeyboardInterrupt):
        output.write_rendered([Environment("dev", entries)], out)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert [p.name for p in out.parent.iterdir()] == ["rendered"]  # no staging folder left beside it
