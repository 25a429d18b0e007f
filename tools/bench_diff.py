"""Time `scripts/diff` on a fleet of environments against twice the render floor.

    .venv/bin/python tools/bench_diff.py [--environments N] [--repeat R] [--keep DIR]

Builds the validate bench's fleet (tools/bench.py: the default project grown with
scripts/new-environment to N environments of varied GPU types and FSx types), commits it to a
git repository, then makes a realistic change (a new trainer image for every environment,
two more workers in prod).

- render floor: the best of R in-process `render_repository` runs over the whole fleet;
- diff: the best of R in-process runs of diff's command line (`--base main`, markdown to a
  file): base checked out in a temporary worktree, both sides rendered, paired, masked,
  formatted. Render and diff runs alternate, so load from elsewhere hits both alike.

diff renders two trees, so twice the floor is its natural budget. `measure(root)` is the
reusable part for a bench runner that builds its own fleet.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from committed import committed_copy

ROOT = Path(__file__).resolve().parent.parent
COOKIECUTTER = Path(sys.executable).parent / "cookiecutter"
# The projects' scripts/<verb> run the tool this environment has installed (the working copy of tool/).
os.environ["EKS_GPU_GITOPS"] = str(Path(sys.executable).with_name("eks-gpu-gitops"))
_GIT = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def bake(out: Path) -> Path:
    """The default project, baked from a copy of the template as it would be committed."""
    template = committed_copy(ROOT, out / "template")
    subprocess.run(
        [str(COOKIECUTTER), "--no-input", str(template), "-o", str(out), "project_slug=fleet"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return out / "fleet"


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, env={**os.environ, **_GIT})


def commit_fleet(project: Path) -> None:
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "--all")
    git(project, "commit", "--quiet", "-m", "fleet")


def change(project: Path) -> None:
    """A new trainer image everywhere, and two more prod workers."""
    kustomization = project / "overlays" / "base" / "training" / "kustomization.yaml"
    text = kustomization.read_text()
    tag_line = next(line for line in text.splitlines() if line.strip().startswith("newTag:"))
    kustomization.write_text(text.replace(tag_line, tag_line.split(":")[0] + ': "9.9.9-bench"'))
    settings = project / "overlays" / "prod" / "settings.yaml"
    lines = settings.read_text().splitlines()
    at = lines.index("training:") + 1  # its first key is workers
    workers = int(lines[at].split(":")[1])
    lines[at] = f"  workers: {workers + 2}"
    settings.write_text("\n".join(lines) + "\n")


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(root: Path, repeat: int = 3) -> dict:
    """Render floor and diff time (seconds, best of `repeat`) for the git repository at `root`."""
    from eks_gpu_gitops.cli.diff import main
    from eks_gpu_gitops.render.repository import render_repository

    environments = render_repository(root)
    objects = sum(len(e.objects) + (e.cluster_config is not None) for e in environments)
    output = Path(tempfile.mkdtemp(prefix="bench-diff-")) / "diff.md"
    here = Path.cwd()
    status = {}

    def run_diff():
        os.chdir(root)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                status["code"] = main(["--base", "main", "--format", "markdown", "--output", str(output)])
        finally:
            os.chdir(here)

    # Interleaved, best of each: load from other processes hits both alike.
    floors, diffs = [], []
    for _ in range(repeat):
        floors.append(timed(lambda: render_repository(root)))
        diffs.append(timed(run_diff))
    floor, diff = min(floors), min(diffs)
    if status["code"] != 0:
        raise SystemExit(f"bench_diff: diff exited with status {status['code']}")
    comment = output.read_text()
    shutil.rmtree(output.parent, ignore_errors=True)
    return {
        "environments": len(environments),
        "objects": objects,
        "render_floor_s": floor,
        "diff_s": diff,
        "budget_s": 2 * floor,
        "comment_chars": len(comment),
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
    }


def report(figures: dict) -> str:
    ratio = figures["diff_s"] / figures["budget_s"]
    verdict = "within" if ratio <= 1 else "over"
    return (
        f"diff bench: {figures['environments']} environments, {figures['objects']} objects per side, "
        f"{figures['cores']} cores (load average {figures['load']:.1f} at the end)\n"
        f"  render floor (render_repository once)  {figures['render_floor_s']:6.2f} s\n"
        f"  2 x render floor                       {figures['budget_s']:6.2f} s\n"
        f"  scripts/diff --format markdown         {figures['diff_s']:6.2f} s  "
        f"= {ratio:.2f} x 2 x floor ({verdict})\n"
        f"  markdown comment                       {figures['comment_chars']:,} characters"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environments", type=int, default=24, help="fleet size (default 24, at least 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the best counts (default 3)")
    parser.add_argument("--keep", type=Path, help="build the fleet in this folder and keep it")
    args = parser.parse_args()
    if args.environments < 20:
        parser.error("--environments must be at least 20")
    from bench import fleet  # here, not at the top: bench.py imports bake() from this file

    # Both sides rendered in full, as the floor is: no render cache (tools/bench_cache.py measures it).
    os.environ["GITOPS_RENDER_CACHE"] = "off"

    with fleet(args.environments, args.keep) as project:
        commit_fleet(project)
        change(project)
        print(report(measure(project, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
