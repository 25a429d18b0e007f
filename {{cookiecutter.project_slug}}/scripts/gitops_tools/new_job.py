"""Add a training job (an MPIJob) to an environment.

    scripts/new-job NAME --env ENV --workers W [--gpus-per-worker G] [--image I]
        [--epochs N] [--batch-size N] [--base-lr X] [--warmup-epochs N] [--model M] [--seed N]

Defaults come from the environment: its GPU type (whole-node workers), the image and trainer
settings of its horovod-train job. The new job is checked by the validator in a temporary copy
first; a request it refuses (more GPUs than the node group can ever hold, say) writes nothing.
Running it again with the same arguments changes nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from ruamel.yaml import YAML

from . import answers, catalog
from .errors import InputError
from .generate.job import JobSpec, job_manifest, model_job
from .render import render_repository, repository_root

TRAINER_FLAGS = ("epochs", "batch-size", "base-lr", "warmup-epochs", "model", "seed")
COPIED = ("clusters", "overlays", "platform.yaml", ".yamllint")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="new-job", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="job name (DNS-1035 label)")
    parser.add_argument("--env", required=True)
    parser.add_argument("--workers", required=True, help="MPI workers (pods)")
    parser.add_argument("--gpus-per-worker", help="default: all GPUs of the environment's instance type")
    parser.add_argument("--image", help="default: the image of the environment's horovod-train job")
    for flag in TRAINER_FLAGS:
        parser.add_argument(f"--{flag}", help=f"trainer --{flag}")
    return parser.parse_args(argv)


def job_paths(root: Path, env: str, name: str) -> tuple[Path, Path]:
    folder = root / "overlays" / env / "training"
    return folder / f"mpijob-{name}.yaml", folder / "kustomization.yaml"


def add_resource(kustomization: Path, entry: str) -> None:
    """Append `entry` to `resources`, keeping the file's comments and key order."""
    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.indent(mapping=2, sequence=4, offset=2)
    round_trip.explicit_start = kustomization.read_text().lstrip().startswith("---")
    data = round_trip.load(kustomization.read_text())
    resources = data.setdefault("resources", [])
    if entry not in resources:
        resources.append(entry)
    buffer = io.StringIO()
    round_trip.dump(data, buffer)
    kustomization.write_text(buffer.getvalue())


def job_text(job: dict, spec: JobSpec) -> str:
    header = (f"---\n# Added by scripts/new-job: {spec.workers} worker(s) x {spec.gpus_per_worker} GPU(s); "
              f"-np = {spec.workers * spec.gpus_per_worker}.\n")
    return header + yaml.safe_dump(job, sort_keys=False)


def plan(root: Path, args) -> tuple[JobSpec, dict]:
    problem = answers.check_slug(args.name, question="NAME")
    if problem:
        raise InputError(problem)
    environments = render_repository(root, [args.env])
    environment = environments[0]
    model = model_job(environment.objects)
    if model is None or environment.cluster_config is None:
        raise InputError(f"--env: {args.env} has no horovod-train MPIJob or no eksctl overlay to model a job on")
    config = environment.cluster_config.doc
    group = next(g for g in config["managedNodeGroups"] if g.get("name") == "gpu")
    instance = catalog.lookup(group["instanceType"])
    workers, problem = answers.parse_count(args.workers, "--workers")
    if problem:
        raise InputError(problem)
    gpus, problem = answers.parse_count(args.gpus_per_worker or instance.gpus, "--gpus-per-worker")
    if problem:
        raise InputError(problem)
    image = args.image or model["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    flags = {flag: str(getattr(args, flag.replace("-", "_"))) for flag in TRAINER_FLAGS
             if getattr(args, flag.replace("-", "_")) is not None}
    spec = JobSpec(args.name, args.env, workers, gpus, image, flags)
    return spec, job_manifest(model, spec, instance, bool(group.get("efaEnabled")))


def validator_objections(root: Path, spec: JobSpec, text: str) -> list[str]:
    """Errors the validator reports about the new job, checked in a temporary copy of the tree."""
    from .validate import Options, validate   # only needed here; keeps import time low

    with tempfile.TemporaryDirectory(prefix="new-job-") as scratch:
        copy_root = Path(scratch)
        for name in COPIED:
            source = root / name
            if source.is_dir():
                shutil.copytree(source, copy_root / name)
            elif source.is_file():
                shutil.copy2(source, copy_root / name)
        job_file, kustomization = job_paths(copy_root, spec.env, spec.name)
        job_file.write_text(text)
        add_resource(kustomization, job_file.name)
        result = validate(Options(paths=[copy_root], envs=[spec.env],
                                  schema_dir=Path(os.environ["GITOPS_SCHEMA_DIR"]) if os.environ.get("GITOPS_SCHEMA_DIR") else None))
    resource = f"MPIJob/training/{spec.name}"
    return [f"{f.rule}: {f.message} ({f.remediation})" for f in result.findings
            if f.severity == "error" and f.resource == resource]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        root = repository_root(Path.cwd())
        spec, job = plan(root, args)
        text = job_text(job, spec)
        job_file, kustomization = job_paths(root, spec.env, spec.name)
        if job_file.exists():
            if job_file.read_text() == text:
                add_resource(kustomization, job_file.name)
                print(f"{job_file.relative_to(root)} is already there with these settings; nothing to do")
                return 0
            raise InputError(f"NAME: job {spec.name!r} already exists in {spec.env} ({job_file.relative_to(root)}) "
                             "with other settings; edit it or choose another name")
        objections = validator_objections(root, spec, text)
        if objections:
            raise InputError(objections[0])
        job_file.write_text(text)
        add_resource(kustomization, job_file.name)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {job_file.relative_to(root)} and listed it in {kustomization.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
