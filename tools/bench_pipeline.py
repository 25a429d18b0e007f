"""Time `scripts/validate` against the pipeline users compare it with: kustomize build, then kubeconform.

    .venv/bin/python tools/bench_pipeline.py [--environments N] [--repeat R] [--kubeconform PATH] [--keep DIR]

Builds the validate bench's fleet (tools/bench.py: the default project grown with scripts/new-environment
to N environments, default 20). Then R rounds (default 3), each running, in turn (so load from elsewhere
hits all alike), every command a fresh process:

- pipeline: kustomize of every overlay validate renders (the folders tools/bench.py's floor builds: each
  environment's Flux Kustomization paths and its eksctl overlay; `kustomize build` when on PATH, else
  `kubectl kustomize`, with Flux's load restrictor), a pool of one worker per core, each build's output
  written to a file in a temporary folder; then ONE `kubeconform -strict -summary` process over all of
  those files, with the Kubernetes schemas and the CRD (and eksctl) schemas;
- validate cold: `scripts/validate --format json` with an empty render cache (GITOPS_RENDER_CACHE), offline
  (GITOPS_OFFLINE=1: like the pipeline, it renders no HelmRelease's chart; tools/bench_helm.py times charts);
- validate warm: the same again with the cache the cold run left.

The schemas, made once before any timing, offline (nothing here reaches GitHub):

- built-in kinds: what `-schema-location default` downloads is yannh/kubernetes-json-schema's
  `v<version>-standalone-strict/<kind>-<group>-<version>.json`. The same JSON schemas ship in the
  kubernetes-validate package (kubernetes_validate/kubernetes-json-schema/v<version>-local-strict/, one
  file per kind with the same names), but their `$ref`s point at https://kubernetes.io/api/_definitions.json.
  Each kind's file is made self-contained (the definitions it reaches copied into its `$defs`) and laid out
  as that repository is, so `-schema-location <folder>` is kubeconform's own default layout on a folder;
- custom resources: each CRD of GITOPS_SCHEMA_DIR/crds (the pinned releases validate checks against),
  every version's openAPIV3Schema converted as kubeconform's scripts/openapi2jsonschema.py does (nested
  objects that list properties closed, int-or-string made a oneOf), into
  `<folder>/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json`; the eksctl ClusterConfig's schema
  (GITOPS_SCHEMA_DIR/eksctl/schema.json) as eksctl.io/clusterconfig_v1alpha5.json, since validate checks it.

The table shows the median and the best wall time of each (CPU time of the best run with its children),
and validate / pipeline for both. Nothing is asserted: it is a comparison to read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import _child_cpu, fleet, overlays, timed  # noqa: E402

KUBECONFORM_VARIABLE = "GITOPS_KUBECONFORM"
# What a user's pipeline runs: the standalone kustomize, else kubectl's, with the restrictor Flux builds with
# (tools/bench.py's floor runs the same).
KUSTOMIZE = ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]
KUSTOMIZE += ["--load-restrictor", "LoadRestrictionsNone"]
# A kind's file refers to "/api/_definitions.json#/$defs/<name>", a definition to another as "#/$defs/<name>".
_DEFINITIONS_REF = re.compile(r'"\$ref": "(?:/api/_definitions\.json)?#/\$defs/([^"]+)"')
_SUMMARY = re.compile(
    r"Summary: (\d+) resources? found in (\d+) files? - Valid: (\d+), Invalid: (\d+), Errors: (\d+), Skipped: (\d+)"
)


def builtin_schemas(version: str, out: Path) -> Path:
    """kubernetes-validate's strict schemas for Kubernetes `version` (x.y.z), every kind's file made
    self-contained, in yannh/kubernetes-json-schema's layout under `out` (what -schema-location takes)."""
    import kubernetes_validate

    source = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
    if not source.is_dir():
        raise SystemExit(f"bench_pipeline: kubernetes-validate has no schemas for Kubernetes {version}")
    document = json.loads((source / "_definitions.json").read_text())
    definitions = {name: json.dumps(schema) for name, schema in document["$defs"].items()}
    target = out / f"v{version}-standalone-strict"
    target.mkdir(parents=True)
    for path in source.glob("*.json"):
        schema = json.loads(path.read_text())
        if "x-kubernetes-group-version-kind" not in schema:
            continue  # not a kind of its own: only reached through $ref
        needed, pending = {}, _DEFINITIONS_REF.findall(json.dumps(schema))
        while pending:
            name = pending.pop()
            if name not in needed:
                needed[name] = definitions[name]
                pending += _DEFINITIONS_REF.findall(definitions[name])
        schema["$defs"] = {name: json.loads(needed[name]) for name in sorted(needed)}
        (target / path.name).write_text(json.dumps(schema).replace('"/api/_definitions.json#/$defs/', '"#/$defs/'))
    return out


def _close_nested(data, skip: bool = False):
    """openapi2jsonschema.py's additional_properties: every dict that lists properties, but the root, closed."""
    if isinstance(data, dict):
        if "properties" in data and not skip and "additionalProperties" not in data:
            data["additionalProperties"] = False
        for value in data.values():
            _close_nested(value)
    return data


def _int_or_string(data):
    """openapi2jsonschema.py's replace_int_or_string."""
    if isinstance(data, dict):
        return {
            key: {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            if isinstance(value, dict) and value.get("format") == "int-or-string"
            else _int_or_string(value)
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [_int_or_string(value) for value in data]
    return data


def custom_schemas(schema_dir: Path, out: Path) -> str:
    """Every CRD version's schema, and eksctl's, as kubeconform reads them; returns the -schema-location."""
    for path in sorted((schema_dir / "crds").glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"].lower()
            for version in crd["spec"]["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema")
                if schema is not None:
                    file = out / group / f"{kind}_{version['name']}.json"
                    file.parent.mkdir(parents=True, exist_ok=True)
                    file.write_text(json.dumps(_int_or_string(_close_nested(schema, skip=True))))
    eksctl = out / "eksctl.io" / "clusterconfig_v1alpha5.json"
    eksctl.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(schema_dir / "eksctl" / "schema.json", eksctl)
    return str(out / "{{.Group}}" / "{{.ResourceKind}}_{{.ResourceAPIVersion}}.json")


def kubernetes_version(project: Path) -> str:
    """The fleet's Kubernetes version as x.y.z (the first environment's eksctl metadata.version)."""
    from eks_gpu_gitops.render import repository as render

    versions = {str(e.cluster_config.doc["metadata"]["version"]) for e in render.render_repository(project)}
    if len(versions) > 1:
        print(f"bench_pipeline: Kubernetes versions {sorted(versions)}: the lowest counts", file=sys.stderr)
    version = min(versions, key=lambda v: tuple(int(part) for part in v.split(".")))
    return version if version.count(".") == 2 else version + ".0"


def pipeline(folders: list[Path], kubeconform: list[str], work: Path) -> tuple[dict, str]:
    """({stage: (wall, CPU)} of the kustomize pool, kubeconform and both, kubeconform's output)."""
    out = Path(tempfile.mkdtemp(prefix="rendered-", dir=work))

    def build(indexed: tuple[int, Path]) -> None:
        index, folder = indexed
        with open(out / f"{index:04d}-{folder.parent.name}-{folder.name}.yaml", "wb") as handle:
            subprocess.run([*KUSTOMIZE, str(folder)], stdout=handle, check=True)

    start, cpu = time.perf_counter(), _child_cpu()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(build, enumerate(folders)))
    rendered = time.perf_counter(), _child_cpu()
    result = subprocess.run([*kubeconform, str(out)], capture_output=True, text=True)
    end = time.perf_counter(), _child_cpu()
    shutil.rmtree(out, ignore_errors=True)
    if result.returncode not in (0, 1) or not _SUMMARY.search(result.stdout):
        raise SystemExit(f"bench_pipeline: kubeconform failed: {(result.stderr or result.stdout).strip()[-500:]}")
    stages = {
        "pipeline": (end[0] - start, end[1] - cpu),
        "render": (rendered[0] - start, rendered[1] - cpu),
        "kubeconform": (end[0] - rendered[0], end[1] - rendered[1]),
    }
    return stages, result.stdout


def validate(project: Path, cache: Path) -> tuple[tuple[float, float], dict]:
    """((wall, CPU), report summary) of `scripts/validate --format json`, a fresh process, render cache `cache`."""
    # Offline: the pipeline renders no HelmRelease's chart, so neither does validate here (tools/bench_helm.py
    # times validate with and without charts); the fleet's chart repositories are on the internet.
    env = {**os.environ, "GITOPS_RENDER_CACHE": str(cache), "GITOPS_OFFLINE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as tools/bench_cache.py: compiled modules kept, as users have
    seconds, result = timed([str(project / "scripts" / "validate"), "--format", "json"], cwd=project, env=env)
    if result.returncode not in (0, 1) or not result.stdout:
        raise SystemExit(f"bench_pipeline: validate failed: {result.stderr.strip()[-500:]}")
    return seconds, json.loads(result.stdout)["summary"]


def measure(project: Path, repeat: int, kubeconform_binary: str) -> dict:
    schema_dir = os.environ.get("GITOPS_SCHEMA_DIR")
    if not schema_dir:
        raise SystemExit("bench_pipeline: set GITOPS_SCHEMA_DIR to the pinned CRD and eksctl schemas (make bench does)")
    folders = overlays(project)
    version = kubernetes_version(project)
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    try:
        kubeconform = [
            kubeconform_binary,
            "-strict",
            "-summary",
            "-kubernetes-version",
            version,
            "-schema-location",
            str(builtin_schemas(version, work / "kubernetes-json-schema")),
            "-schema-location",
            custom_schemas(Path(schema_dir), work / "crd-schemas"),
        ]
        runs = {"pipeline": [], "render": [], "kubeconform": [], "cold": [], "warm": []}
        for index in range(repeat):
            stages, output = pipeline(folders, kubeconform, work)
            for name, figures in stages.items():
                runs[name].append(figures)
            cache = work / f"render-cache-{index}"
            seconds, summary = validate(project, cache)
            runs["cold"].append(seconds)
            runs["warm"].append(validate(project, cache)[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    found, files, valid, invalid, errors, skipped = map(int, _SUMMARY.search(output).groups())
    problems = [line for line in output.splitlines() if not line.startswith("Summary:")]
    return {
        "runs": runs,
        "environments": len(list((project / "clusters").iterdir())),
        "overlays": len(folders),
        "kubernetes": version,
        "kubeconform": {"resources": found, "files": files, "valid": valid, "invalid": invalid, "errors": errors},
        "kubeconform_skipped": skipped,
        "kubeconform_problems": problems,
        "validate": summary,
        "repeat": repeat,
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
    }


def report(f: dict) -> str:
    runs = f["runs"]
    median = {name: statistics.median(wall for wall, _ in values) for name, values in runs.items()}
    best = {name: min(values) for name, values in runs.items()}  # best wall time, with its CPU time

    def line(label: str, name: str) -> str:
        return f"  {label:<46} {median[name]:7.2f} s {best[name][0]:7.2f} s {best[name][1]:7.2f} s"

    def ratio(label: str, name: str) -> str:
        return (
            f"  {label:<46} {median[name] / median['pipeline']:7.2f} x {best[name][0] / best['pipeline'][0]:7.2f} x"
            f" {best[name][1] / best['pipeline'][1]:7.2f} x"
        )

    k, v = f["kubeconform"], f["validate"]
    lines = [
        f"pipeline bench: {f['environments']} environments, {f['overlays']} overlays, Kubernetes {f['kubernetes']}, "
        f"{f['cores']} cores, load {f['load']:.1f}, {f['repeat']} runs each",
        f"  kubeconform: {k['resources']} resources in {k['files']} files, {k['valid']} valid, {k['invalid']} invalid, "
        f"{k['errors']} errors, {f['kubeconform_skipped']} skipped",
        f"  validate: {v['objects']} objects, {v['errors']} errors, {v['warnings']} warnings",
        f"  {'':<46} {'median':>9} {'best':>9} {'CPU':>9}",
        line("pipeline: kustomize pool + one kubeconform", "pipeline"),
        line("  kustomize, 1 worker/core, to files", "render"),
        line("  kubeconform -strict, one process", "kubeconform"),
        line("validate cold (empty render cache)", "cold"),
        line("validate warm (the cold run's cache)", "warm"),
        ratio("validate cold / pipeline", "cold"),
        ratio("validate warm / pipeline", "warm"),
    ]
    lines += [f"  kubeconform: {problem}" for problem in f["kubeconform_problems"][:10]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environments", type=int, default=20, help="fleet size (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument(
        "--kubeconform",
        default=os.environ.get(KUBECONFORM_VARIABLE) or shutil.which("kubeconform"),
        help=f"the kubeconform binary (default: {KUBECONFORM_VARIABLE}, else PATH; `make kubeconform` builds it)",
    )
    parser.add_argument("--keep", type=Path, help="build the fleet in this folder and keep it")
    args = parser.parse_args()
    if args.environments < 1 or args.repeat < 1:
        parser.error("--environments and --repeat must be at least 1")
    if not args.kubeconform:
        parser.error(f"no kubeconform: give --kubeconform or {KUBECONFORM_VARIABLE} (make kubeconform builds it)")
    # This process's own renders (finding the overlays and the version) neither read nor fill a render cache.
    os.environ["GITOPS_RENDER_CACHE"] = "off"
    with fleet(args.environments, args.keep) as project:
        print(report(measure(project, args.repeat, args.kubeconform)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
