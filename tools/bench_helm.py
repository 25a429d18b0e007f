"""Time `eks-gpu-gitops render` of a fleet's HelmReleases against `helm template` of the same charts and values.

    .venv/bin/python tools/bench_helm.py [--environments N] [--repeat R] [--helm PATH] [--keep DIR]

Bakes the default project (tools/bench.py's fleet: grown with scripts/new-environment to N environments,
default 2, the bake's dev and prod) and serves its three charts on loopback as tool/tests/test_helm_release.py
does (chart_repository.template_charts: the FSx CSI driver's chart as 1.17.0 and a stand-in Cluster Autoscaler
9.59.0 over an HTTP index; the real Kueue 0.19.2 pushed to an OCI registry), the bake's HelmRepository and
OCIRepository URLs pointed at them. A first `render --out` fills the chart cache (GITOPS_CHART_CACHE) and
gives the HelmReleases as the environments render them. Then R rounds (default 5), each running in turn (so
load from elsewhere hits all alike), every command a fresh process, no render cache unless said:

- ours, warm caches: `eks-gpu-gitops render --out DIR`, every environment, with the chart cache and a render
  cache a first render filled (CI's usual case: main's runs keep both);
- ours: the same with GITOPS_RENDER_CACHE=off (every Flux build and every chart render runs);
- Flux builds alone: the same render with GITOPS_OFFLINE=1 and an empty chart cache (no chart is rendered),
  so the chart part of ours shows;
- helm template: one `helm template <releaseName> <chart .tgz> --namespace <targetNamespace> --kube-version
  1.34.0 --values <spec.values>` process per HelmRelease per environment, sequentially (as flux-local renders),
  output to files; the .tgz is the archive served, the values each HelmRelease's spec.values as rendered;
- helm pipeline: the Flux builds alone, then helm template (flux-local's work: build, then one helm per release);
- validate: `eks-gpu-gitops validate --format json --quiet` of the repository, cold (an empty render cache
  folder) then warm (the same folder again), with charts (warm chart cache) and without (GITOPS_OFFLINE=1, an
  empty chart cache).

The table shows the median and the best wall time of each (CPU time of the best run with its children) and the
ratios; the target is ours within 1.0 x the helm pipeline. Nothing is asserted: it is a comparison to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(1, str(TOOLS.parent / "tool" / "tests"))  # the loopback chart repository of the tool's tests
from bench import _child_cpu, fleet, timed  # noqa: E402
from chart_repository import (  # noqa: E402
    ChartRepository,
    OciRegistry,
    oci_registry_binary,
    package_chart,
    push_chart,
    read_packaged_chart_yaml,
    real_chart,
    template_charts,
)

HELM_VARIABLE = "GITOPS_HELM"
TOOL = str(Path(sys.executable).with_name("eks-gpu-gitops"))
KUBE_VERSION = "1.34.0"
TARGET = 1.0
HTTP_SOURCES = ("overlays/base/fsx-csi/helmrepository.yaml", "overlays/base/cluster-autoscaler/helmrepository.yaml")
OCI_SOURCE = "overlays/base/kueue/ocirepository.yaml"


def _edit(project: Path, path: str, change) -> None:
    file = project / path
    docs = [doc for doc in yaml.safe_load_all(file.read_text()) if doc]
    for doc in docs:
        change(doc)
    file.write_text("".join("---\n" + yaml.safe_dump(doc, sort_keys=False) for doc in docs))


def point_sources(project: Path, http_url: str, oci_url: str) -> None:
    """The bake's HelmRepositories at the HTTP repository, its OCIRepository at the registry (as the tests do)."""
    for path in HTTP_SOURCES:
        _edit(project, path, lambda doc: doc["spec"].update(url=http_url))
    _edit(project, OCI_SOURCE, lambda doc: doc["spec"].update(url=oci_url, insecure=True))


def environment(chart_cache: Path, offline: bool) -> dict:
    """A child's environment: that chart cache, the network allowed or not, no render cache."""
    env = {**os.environ, "GITOPS_CHART_CACHE": str(chart_cache), "GITOPS_RENDER_CACHE": "off"}
    env.pop("GITOPS_OFFLINE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as tools/bench_cache.py: compiled modules kept, as users have
    return {**env, "GITOPS_OFFLINE": "1"} if offline else env


def render(project: Path, out: Path, env: dict) -> tuple[float, float]:
    """(wall, CPU) of `eks-gpu-gitops render --out out`, a fresh process; out is removed first."""
    shutil.rmtree(out, ignore_errors=True)
    seconds, result = timed([TOOL, "render", "--out", str(out)], cwd=project, env=env)
    if result.returncode != 0:
        raise SystemExit(f"bench_helm: render failed: {(result.stderr or result.stdout).strip()[-800:]}")
    return seconds


def helm_jobs(rendered: Path, archives: dict[tuple[str, str], Path], work: Path) -> list[list[str]]:
    """One `helm template` command line (without the binary) per HelmRelease per environment of a render's
    output: the HelmReleases of DIR/<env>/<kustomization>.yaml, each spec.values written to a file."""
    values_dir = work / "values"
    values_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for env_dir in sorted(p for p in rendered.iterdir() if p.is_dir()):
        docs = []
        for file in sorted(env_dir.glob("*.yaml")):
            if not file.name.startswith("helmrelease-"):
                docs += [doc for doc in yaml.safe_load_all(file.read_text()) if isinstance(doc, dict)]
        sources = {(doc.get("kind"), doc["metadata"].get("namespace"), doc["metadata"]["name"]): doc for doc in docs}
        for doc in docs:
            if doc.get("kind") != "HelmRelease":
                continue
            metadata, spec = doc["metadata"], doc["spec"]
            if spec.get("valuesFrom"):
                raise SystemExit(f"bench_helm: {env_dir.name}/{metadata['name']}: valuesFrom is not timed here")
            if "chartRef" in spec:
                ref = spec["chartRef"]
                source = sources[(ref["kind"], ref.get("namespace") or metadata["namespace"], ref["name"])]
                chart = (source["spec"]["url"].rstrip("/").rsplit("/", 1)[-1], str(source["spec"]["ref"]["tag"]))
            else:
                chart = (spec["chart"]["spec"]["chart"], str(spec["chart"]["spec"]["version"]))
            values = values_dir / f"{env_dir.name}-{metadata['name']}.yaml"
            values.write_text(yaml.safe_dump(spec.get("values") or {}, sort_keys=False))
            jobs.append(
                [
                    "template",
                    str(spec.get("releaseName") or metadata["name"]),
                    str(archives[chart]),
                    "--namespace",
                    str(spec.get("targetNamespace") or metadata["namespace"]),
                    "--kube-version",
                    KUBE_VERSION,
                    "--values",
                    str(values),
                ]
            )
    return jobs


def helm_template(helm: str, jobs: list[list[str]], out: Path, env: dict) -> tuple[float, float]:
    """(wall, CPU) of every job's `helm template`, one process each, sequentially, each output to a file."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    start, cpu = time.perf_counter(), _child_cpu()
    for index, job in enumerate(jobs):
        with open(out / f"{index:03d}-{job[1]}.yaml", "wb") as handle:
            result = subprocess.run([helm, *job], stdout=handle, stderr=subprocess.PIPE, env=env)
        if result.returncode != 0:
            raise SystemExit(f"bench_helm: helm {' '.join(job)}: {result.stderr.decode().strip()[-800:]}")
    return time.perf_counter() - start, _child_cpu() - cpu


def validate(project: Path, env: dict) -> tuple[tuple[float, float], dict]:
    """((wall, CPU), report summary) of `eks-gpu-gitops validate --format json --quiet`, a fresh process."""
    seconds, result = timed([TOOL, "validate", "--format", "json", "--quiet"], cwd=project, env=env)
    if result.returncode not in (0, 1) or not result.stdout:
        raise SystemExit(f"bench_helm: validate failed: {(result.stderr or result.stdout).strip()[-800:]}")
    report = json.loads(result.stdout)
    return seconds, {**report["summary"], "notes": report.get("notes", [])}


def count_documents(folder: Path, pattern: str) -> int:
    return sum(
        1 for file in folder.rglob(pattern) for doc in yaml.safe_load_all(file.read_text()) if isinstance(doc, dict)
    )


def measure(project: Path, repeat: int, helm: str, work: Path) -> dict:
    fsx, kueue, registry = real_chart("aws-fsx-csi-driver"), real_chart("kueue"), oci_registry_binary()
    if fsx is None or kueue is None or registry is None:
        raise SystemExit("bench_helm: Go or the module proxy could not give the real charts and the OCI registry")
    served = template_charts(work / "charts")
    oci_tgz = package_chart(kueue, work / "oci")
    archives = {}
    for tgz in [*served.glob("*.tgz"), oci_tgz]:
        chart = read_packaged_chart_yaml(tgz)
        archives[(str(chart["name"]), str(chart["version"]))] = tgz
    chart_cache, empty = work / "chart-cache", work / "empty-chart-cache"
    empty.mkdir()
    # Helm's own folders here, not the user's (helm template of an archive reads none of them).
    helm_home = {f"HELM_{name}_HOME": str(work / "helm" / name.lower()) for name in ("CACHE", "CONFIG", "DATA")}
    with ChartRepository(served) as http, OciRegistry(registry) as oci:
        pushed = push_chart(oci_tgz, oci.url, "kueue/charts")
        point_sources(project, http.url, pushed.url)
        with_charts = environment(chart_cache, offline=False)
        without_charts = environment(empty, offline=True)
        first = work / "first"
        render(project, first, with_charts)  # fetches every chart into the chart cache
        warm = {**with_charts, "GITOPS_RENDER_CACHE": str(work / "render-cache-warm")}
        render(project, work / "warm-first", warm)  # and fills a render cache
        jobs = helm_jobs(first, archives, work)
        releases = len(list(first.rglob("helmrelease-*.yaml")))
        if releases != len(jobs):
            raise SystemExit(f"bench_helm: {releases} releases rendered, {len(jobs)} HelmReleases found")
        helm_env = {**os.environ, **helm_home}
        names = ("ours", "ours_warm", "flux", "helm", "pipeline", "cold", "warm", "cold0", "warm0")
        runs = {name: [] for name in names}
        summaries = {}
        asked = len(http.requests)
        for index in range(repeat):
            runs["ours"].append(render(project, work / "ours", with_charts))
            runs["ours_warm"].append(render(project, work / "ours-warm", warm))
            flux = render(project, work / "flux", without_charts)
            runs["flux"].append(flux)
            helm_run = helm_template(helm, jobs, work / "helm-out", helm_env)
            runs["helm"].append(helm_run)
            runs["pipeline"].append((flux[0] + helm_run[0], flux[1] + helm_run[1]))
            for suffix, env in (("", with_charts), ("0", without_charts)):
                cache = work / f"render-cache{suffix}-{index}"
                env = {**env, "GITOPS_RENDER_CACHE": str(cache)}
                runs["cold" + suffix].append(validate(project, env)[0])
                seconds, summaries[suffix or "charts"] = validate(project, env)
                runs["warm" + suffix].append(seconds)
        asked = len(http.requests) - asked
    return {
        "runs": runs,
        "environments": len([p for p in first.iterdir() if p.is_dir()]),
        "releases": len(jobs),
        "charts": sorted(f"{name} {version}" for name, version in archives),
        "ours_objects": count_documents(work / "ours", "helmrelease-*.yaml"),
        "flux_releases": len(list((work / "flux").rglob("helmrelease-*.yaml"))),
        "helm_objects": count_documents(work / "helm-out", "*.yaml"),
        "http_requests": asked,
        "validate": summaries,
        "repeat": repeat,
        "cores": os.cpu_count(),
        "load": os.getloadavg(),
    }


def report(f: dict) -> str:
    runs = f["runs"]
    median = {name: statistics.median(wall for wall, _ in values) for name, values in runs.items()}
    best = {name: min(values) for name, values in runs.items()}  # best wall time, with its CPU time

    def line(label: str, name: str) -> str:
        return f"  {label:<52} {median[name]:7.2f} s {best[name][0]:7.2f} s {best[name][1]:7.2f} s"

    def ratio(label: str, name: str, over: str, verdict: bool = False) -> str:
        text = (
            f"  {label:<52} {median[name] / median[over]:7.2f} x {best[name][0] / best[over][0]:7.2f} x"
            f" {best[name][1] / best[over][1]:7.2f} x"
        )
        if verdict:
            text += "  " + ("ok" if median[name] / median[over] <= TARGET else "OVER") + f" (target <= {TARGET} x)"
        return text

    chart_part = [ours[0] - flux[0] for ours, flux in zip(runs["ours"], runs["flux"], strict=True)]
    chart_cpu = [ours[1] - flux[1] for ours, flux in zip(runs["ours"], runs["flux"], strict=True)]
    helm_walls = [wall for wall, _ in runs["helm"]]
    charts, plain = f["validate"]["charts"], f["validate"]["0"]
    load = " / ".join(f"{value:.2f}" for value in f["load"])
    lines = [
        f"helm bench: {f['environments']} environments, {f['releases']} HelmReleases ({', '.join(f['charts'])}), "
        f"{f['cores']} cores, load {load} (1/5/15 min), {f['repeat']} runs each",
        f"  chart objects: ours {f['ours_objects']}, helm template {f['helm_objects']}; "
        f"offline renders wrote {f['flux_releases']} release files; "
        f"HTTP chart repository asked {f['http_requests']} times while timing",
        f"  validate with charts: {charts['objects']} objects, {charts['errors']} errors, {charts['warnings']} "
        f"warnings; without: {plain['objects']} objects, {plain['errors']} errors, {plain['warnings']} warnings, "
        f"{len(plain['notes'])} notes",
        f"  {'':<52} {'median':>9} {'best':>9} {'CPU':>9}",
        line("ours: render --out, warm chart and render caches", "ours_warm"),
        line("ours: render --out, warm chart cache, no render cache", "ours"),
        line("  Flux builds alone: render, offline, no charts", "flux"),
        f"  {'  chart part of ours (ours - Flux builds, per round)':<52} {statistics.median(chart_part):7.2f} s "
        f"{min(chart_part):7.2f} s {statistics.median(chart_cpu):7.2f} s (CPU: median)",
        line(f"helm template, {f['releases']} processes, sequential (b')", "helm"),
        line("helm pipeline: Flux builds + helm template (b)", "pipeline"),
        ratio("ours, warm caches / helm pipeline (b)", "ours_warm", "pipeline", verdict=True),
        ratio("ours, no render cache / helm pipeline (b)", "ours", "pipeline", verdict=True),
        ratio("ours / helm template alone (b')", "ours", "helm"),
        f"  {'chart part of ours / helm template alone':<52} "
        f"{statistics.median(chart_part) / statistics.median(helm_walls):7.2f} x "
        f"{min(chart_part) / min(helm_walls):7.2f} x",
        line("validate cold, with charts (warm chart cache)", "cold"),
        line("validate warm, with charts", "warm"),
        line("validate cold, without charts (offline, empty)", "cold0"),
        line("validate warm, without charts", "warm0"),
        ratio("validate cold: with / without charts", "cold", "cold0"),
        ratio("validate warm: with / without charts", "warm", "warm0"),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environments", type=int, default=2, help="fleet size (default 2: the bake's dev, prod)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument(
        "--helm",
        default=os.environ.get(HELM_VARIABLE) or shutil.which("helm"),
        help=f"the Helm CLI (default: {HELM_VARIABLE}, else PATH; `make helm` builds v4.2.4)",
    )
    parser.add_argument("--keep", type=Path, help="build the fleet and the charts in this folder and keep them")
    args = parser.parse_args()
    if args.environments < 2 or args.repeat < 1:
        parser.error("--environments must be at least 2 and --repeat at least 1")
    if not args.helm:
        parser.error(f"no Helm CLI: give --helm or {HELM_VARIABLE} (make helm builds it)")
    # This process's own renders (growing the fleet) neither read nor fill a render cache.
    os.environ["GITOPS_RENDER_CACHE"] = "off"
    with fleet(args.environments, args.keep) as project:
        work = Path(tempfile.mkdtemp(prefix="bench-helm-", dir=args.keep))
        try:
            print(report(measure(project, args.repeat, args.helm, work)))
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
