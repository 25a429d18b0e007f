"""Time validate and diff with the render cache on a fleet against the parallel render floor.

    .venv/bin/python tools/bench_cache.py [--environments N] [--repeat R] [--keep DIR]

Builds the validate bench's fleet (tools/bench.py: the default project grown with
scripts/new-environment to N environments, default 20), commits it, then in one run, best of R
each (runs alternate, so load from elsewhere hits all alike), every command a fresh process as in CI,
with Python's compiled-module cache on (PYTHONDONTWRITEBYTECODE is dropped for them):

- floor: kustomize of every overlay folder validate builds (each environment's Flux Kustomization
  paths that have a kustomization file, and its eksctl overlay), a process per build, a pool of one
  worker per core;
- the helper alone over the same folders, one process per core (what validate's renders cost; shown,
  not a target);
- validate cold: `scripts/validate` with an empty render cache (GITOPS_RENDER_CACHE), target <= 1.2 x floor;
- validate warm: the same with the cache a cold run left, target <= 0.3 x floor;
- a one-environment pull request (one more worker in one environment's settings): `scripts/diff
  --base main` against `scripts/diff --base main --env <that environment>`, both starting from the
  cache a validate of main left (what CI restores for a pull request: diff leaves out an environment
  only when an earlier render's reads hold on both sides), target <= 1.5 x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import fleet, kustomize_command  # noqa: E402
from bench_diff import commit_fleet  # noqa: E402

TARGETS = {"cold": 1.2, "warm": 0.3, "diff": 1.5}
CHANGED_ENV = "team-05"


def overlay_folders(project: Path) -> list[Path]:
    """Every folder validate runs kustomize on (found by rendering once, without the cache)."""
    from eks_gpu_gitops.render import helper
    from eks_gpu_gitops.render import repository as render

    os.environ["GITOPS_RENDER_CACHE"] = "off"
    folders = []
    for environment in render.render_repository(project):
        folders += [project / k.path for k in environment.kustomizations if helper.has_kustomization(project / k.path)]
        eksctl = project / "overlays" / environment.name / "eksctl"
        if eksctl.is_dir():
            folders.append(eksctl)
    return folders


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # includes waited-for grandchildren
    return usage.ru_utime + usage.ru_stime


def floor(folders: list[Path]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of kustomize over every folder, one worker per core."""
    command = [*kustomize_command(), "--load-restrictor", "LoadRestrictionsNone"]

    def build(folder: Path) -> None:
        subprocess.run([*command, str(folder)], capture_output=True, check=True)

    start, cpu = time.perf_counter(), _child_cpu()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(build, folders))
    return time.perf_counter() - start, _child_cpu() - cpu


def batch_floor(folders: list[Path], binary: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the helper over every folder, one process per core, each
    sent its share of the folders at once."""
    cores = os.cpu_count() or 1
    start, cpu = time.perf_counter(), _child_cpu()
    processes = [
        subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(min(cores, len(folders)))
    ]
    requests = ["" for _ in processes]
    for index, folder in enumerate(folders):
        requests[index % len(processes)] += json.dumps({"root": str(folder.anchor), "path": str(folder)}) + "\n"
    with ThreadPoolExecutor(max_workers=len(processes)) as pool:
        replies = list(pool.map(lambda pair: pair[0].communicate(pair[1])[0], zip(processes, requests, strict=True)))
    elapsed = time.perf_counter() - start, _child_cpu() - cpu
    answers = [json.loads(line) for reply in replies for line in reply.splitlines()]
    if len(answers) != len(folders) or any("error" in answer for answer in answers):
        raise SystemExit("bench_cache: the helper did not build every folder")
    return elapsed


def timed(project: Path, command: list[str], cache: Path, **extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds with its children) of one command, a fresh process."""
    # GITOPS_OFFLINE=1, as in bench_pipeline.py: no chart is fetched (bench_helm.py times charts), so a machine
    # without the chart repositories' network neither pays a failed fetch per HelmRelease nor keeps no results.
    env = {**os.environ, "GITOPS_RENDER_CACHE": str(cache), "GITOPS_OFFLINE": "1", **extra}
    # Python keeps compiled modules (__pycache__) unless told not to; a machine that sets this variable
    # would add compiling every module to every run, which no user's checkout pays after its first run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start, cpu = time.perf_counter(), _child_cpu()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start, _child_cpu() - cpu
    if result.returncode not in (0, 1):
        raise SystemExit(f"bench_cache: {' '.join(command)} failed: {result.stderr.strip()[-500:]}")
    return seconds


def change_one(project: Path, env: str) -> None:
    """One more worker in one environment: a pull request that touches only that environment."""
    settings = project / "overlays" / env / "settings.yaml"
    lines = settings.read_text().splitlines()
    at = lines.index("training:") + 1  # its first key is workers
    lines[at] = f"  workers: {int(lines[at].split(':')[1]) + 1}"
    settings.write_text("\n".join(lines) + "\n")


def measure(project: Path, repeat: int) -> dict:
    folders = overlay_folders(project)
    scripts = project / "scripts"
    validate = [str(scripts / "validate"), "--format", "json", "--quiet"]
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    from eks_gpu_gitops.render import helper

    binary = helper.binary()
    runs = {"floor": [], "batch": [], "cold": [], "warm": [], "diff": [], "diff_env": []}
    try:
        for index in range(repeat):
            runs["floor"].append(floor(folders))
            runs["batch"].append(batch_floor(folders, binary))
            cache = work / f"validate-{index}"
            runs["cold"].append(timed(project, validate, cache))
            runs["warm"].append(timed(project, validate, cache))
        change_one(project, CHANGED_ENV)
        diff = [str(scripts / "diff"), "--base", "main", "--format", "markdown", "--output", str(work / "d.md")]
        main_cache = work / "validate-0"  # what main's validate left
        for index in range(repeat):
            shutil.copytree(main_cache, work / f"diff-{index}")
            shutil.copytree(main_cache, work / f"diff-env-{index}")
            runs["diff"].append(timed(project, diff, work / f"diff-{index}"))
            runs["diff_env"].append(timed(project, [*diff, "--env", CHANGED_ENV], work / f"diff-env-{index}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {name: min(values) for name, values in runs.items()}  # best wall time, with its CPU time
    best.update(
        environments=len(list((project / "clusters").iterdir())),
        overlays=len(folders),
        cores=os.cpu_count(),
        load=os.getloadavg()[0],
    )
    return best


def report(f: dict) -> str:
    def line(label: str, figures: tuple[float, float]) -> str:
        return f"  {label:<48} {figures[0]:6.2f} s {figures[1]:6.2f} s"

    def row(label: str, figures: tuple[float, float], against: tuple[float, float], target: float | None) -> str:
        ratio = figures[0] / against[0]
        verdict = f"target <= {target} x: {'ok' if ratio <= target else 'OVER'}; " if target else ""
        return f"{line(label, figures)}  {ratio:5.2f} x  ({verdict}CPU {figures[1] / against[1]:.2f} x)"

    return "\n".join(
        [
            f"render cache bench: {f['environments']} environments, {f['overlays']} overlay folders, "
            f"{f['cores']} cores, load {f['load']:.1f} (best wall time of each, with its CPU time)",
            f"  {'':<48}   wall      CPU",
            line("floor: kustomize of every overlay, 1 worker/core", f["floor"]),
            row("the helper alone, 1 process/core / floor", f["batch"], f["floor"], None),
            row("validate, empty cache / floor", f["cold"], f["floor"], TARGETS["cold"]),
            row("validate, warm cache / floor", f["warm"], f["floor"], TARGETS["warm"]),
            line(f"diff --env {CHANGED_ENV} (main's cache)", f["diff_env"]),
            row(f"diff of a {CHANGED_ENV}-only change / diff --env", f["diff"], f["diff_env"], TARGETS["diff"]),
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environments", type=int, default=20, help="fleet size (default 20, at least 20)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per timing; the best counts (default 2)")
    parser.add_argument("--keep", type=Path, help="build the fleet in this folder and keep it")
    args = parser.parse_args()
    if args.environments < 20:
        parser.error("--environments must be at least 20")
    with fleet(args.environments, args.keep) as project:
        commit_fleet(project)
        print(report(measure(project, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
