"""Add a training job (an MPIJob) to an environment.

    scripts/new-job NAME --env ENV --workers W [--gpus-per-worker G] [--image I] [--kind train|benchmark|nccl-tests]
        [--epochs N] [--batch-size N] [--base-lr X] [--warmup-epochs N] [--model M] [--seed N] ...
        [--mixed-precision] [--xla] [--data-format imagenet [--data-dir DIR]] [--floor GBPS]

`--kind train` (default) runs the trainer like horovod-train; `--kind benchmark` runs the synthetic
benchmark (images/s per GPU and the scaling efficiency, trainer/README.md), which reads no data and
mounts no FSx; `--kind nccl-tests` runs NCCL's all_reduce_perf across the GPU nodes (by default all
the gpu group's maxSize, which Cluster Autoscaler starts for it) to measure the fabric's bus bandwidth
before a long job (docs/operations.md of a generated repository, "Acceptance test"); its launcher fails the job
when the all_reduce bus bandwidth at 1 GiB is below the instance type's floor (facts/nccl_tests.py) or --floor's.
Defaults come from
the environment: its GPU type (whole-node workers), the image and trainer settings of its horovod-train
job. Without --image the job follows horovod-train's image (a `replacements` entry in the environment's
training kustomization), so bumping newTag in overlays/base/training moves it too. Every option is checked
before the environment is read or anything written (generate/answers.py): values are one line of text, NAME is
a DNS-1035 label that leaves `<name>-worker-<workers-1>` at most 63 characters (the MPI operator's check), --image
parses with distribution/reference's grammar (facts/limits.py), --gpus-per-worker is at most the instance type's
GPUs and --workers at most what the gpu group holds at maxSize, --data-dir is inside the workers' FSx mount.
Trainer settings are checked by the trainer's own option table. The new job is checked by the validator in a
temporary copy first; a request that adds an error (more GPUs than the queue's quota, say) writes nothing.
Running it again with the same arguments changes nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from ..core.errors import InputError
from ..facts import catalog
from ..model import MPIJOB, plural
from ..render.helper import has_kustomization
from ..render.repository import render_repository
from . import answers
from .files import write_all
from .job import (
    KIND_MODULES,
    JobSpec,
    fsx_mount,
    image_replacement,
    job_manifest,
    model_job,
    nccl_debug_replacement,
)
from .yaml_edit import append_new, edited

# The trainer flags new-job passes on, per kind of job; each is checked by that module's own options.
KIND_FLAGS = {
    "train": (
        "data-dir",
        "epochs",
        "batch-size",
        "base-lr",
        "warmup-epochs",
        "lr-schedule",
        "lr-decay-epochs",
        "optimizer",
        "momentum",
        "weight-decay",
        "model",
        "width",
        "image-size",
        "seed",
    ),
    "benchmark": ("batch-size", "model", "width", "image-size", "num-iters"),
    "nccl-tests": (),
}
TRAINER_FLAGS = tuple(dict.fromkeys(flag for flags in KIND_FLAGS.values() for flag in flags))
SWITCHES = ("mixed-precision", "xla")
# Besides the folders of the environment's Flux paths, what the validator reads.
ALWAYS_COPIED = ("clusters", "overlays", "platform.yaml", ".yamllint")


class Place:
    """Where a job of the environment goes: the folder of the Flux Kustomization that applies horovod-train."""

    def __init__(self, root: Path, folder: str, name: str):
        self.root = root
        self.folder = folder  # relative to root
        self.job_file = f"{folder}/mpijob-{name}.yaml"
        self.kustomization = f"{folder}/kustomization.yaml"

    @property
    def top_folders(self) -> set[str]:
        return {self.folder.split("/", 1)[0]}


def list_job(root: Path, place: Place, job: dict, spec: JobSpec) -> str:
    """The kustomization's text with the job file in `resources` and, when the job follows
    horovod-train's image, its replacement."""

    def change(data: dict) -> None:
        append_new(data.setdefault("resources", []), Path(place.job_file).name)
        if spec.image is None:
            append_new(data.setdefault("replacements", []), image_replacement(job))
        log_level = nccl_debug_replacement(job)
        if log_level:
            append_new(data.setdefault("replacements", []), log_level)

    return edited(root / place.kustomization, change)


def write_job(root: Path, place: Place, job: dict, spec: JobSpec, text: str) -> None:
    write_all(root, {place.job_file: text, place.kustomization: list_job(root, place, job, spec)})


def job_text(job: dict, spec: JobSpec) -> str:
    what = {
        "benchmark": "the synthetic benchmark (trainer/README.md, Benchmark), ",
        "nccl-tests": "nccl-tests all_reduce_perf, the fabric's acceptance test (docs/operations.md), ",
    }.get(spec.kind, "")
    header = (
        f"---\n# Added by scripts/new-job: {what}{spec.workers} worker(s) x {spec.gpus_per_worker} GPU(s); "
        f"-np = {spec.workers * spec.gpus_per_worker}.\n"
    )
    if spec.image is None:
        header += "# image: horovod-train's, set by the `replacements` entry in kustomization.yaml.\n"
    return header + yaml.safe_dump(job, sort_keys=False)


def check_name_free(objects, name: str, env: str) -> None:
    """Refuse a name an MPIJob of the environment already has (Kustomize would fail on the clash)."""
    for manifest in objects:
        if manifest.kind == "MPIJob" and manifest.name == name:
            raise InputError(
                f"NAME: {name!r} is already the name of an MPIJob in {env} ({manifest.resource}); choose another name"
            )


def check_trainer_flags(root: Path, kind: str, flags: dict[str, str], switches: tuple[str, ...]) -> None:
    """Check the values with the trainer's own option table, so the job never fails on a bad setting."""
    for flag in [*flags, *(switches if kind not in KIND_MODULES else ())]:
        if flag not in KIND_FLAGS[kind]:
            takes = f"it takes {', '.join(KIND_FLAGS[kind])}" if KIND_FLAGS[kind] else "it takes no trainer flags"
            raise InputError(f"--{flag} does not apply to --kind {kind} ({takes})")
    if not flags and not switches:
        return
    sys.path.insert(0, str(root / "trainer"))
    try:
        import importlib

        from horovod_trainer.errors import TrainerError
        from horovod_trainer.settings import resolve

        options = importlib.import_module(f"horovod_trainer.{KIND_MODULES[kind]}").OPTIONS
    except ImportError as error:
        raise InputError(f"trainer/horovod_trainer: cannot load the trainer's options ({error})") from None
    finally:
        sys.path.remove(str(root / "trainer"))
    argv = [f"--{flag}={value}" for flag, value in flags.items()] + [f"--{switch}" for switch in switches]
    try:
        values = resolve(options, argv, environ={})
        if kind == "train":
            from horovod_trainer.train import check_combinations

            check_combinations(values)
    except TrainerError as error:
        raise InputError(str(error)) from None


def given_flags(args) -> dict[str, str]:
    """The trainer flags given on the command line, by name."""
    return {
        flag: str(getattr(args, flag.replace("-", "_")))
        for flag in TRAINER_FLAGS
        if getattr(args, flag.replace("-", "_")) is not None
    }


def check_options(args) -> None:
    """What can be checked of the options before the environment is read: every value is one line of text, NAME
    is a name the MPI operator takes, --image a reference the kubelet can pull (generate/answers.py)."""
    texts = {"NAME": args.name, "--env": args.env, "--workers": args.workers, "--gpus-per-worker": args.gpus_per_worker}
    texts |= {f"--{flag}": value for flag, value in given_flags(args).items()}
    for option, value in texts.items():
        problem = answers.check_line(value, option) if value is not None else None
        if problem:
            raise InputError(problem)
    problem = answers.check_mpijob_name(args.name)
    if problem is None and args.image is not None:
        problem = answers.check_image(args.image)
    if problem:
        raise InputError(problem)


def count_options(args, group: dict, instance: catalog.InstanceType) -> tuple[int, int]:
    """(workers, GPUs per worker), each within what the environment's gpu node group holds at maxSize."""
    gpus, problem = answers.parse_count(
        instance.gpus if args.gpus_per_worker is None else args.gpus_per_worker,
        "--gpus-per-worker",
        "GPUs",
        instance.gpus,
        f"the GPUs of one {instance.name} node",
    )
    if problem:
        raise InputError(problem)
    # Every node the autoscaler may start: the group idles at zero (desiredCapacity 0).
    nodes = group.get("maxSize", group.get("desiredCapacity", 1))
    if type(nodes) is not int or nodes < 1:
        raise InputError(f"--env: {args.env}'s gpu node group has maxSize {nodes!r}, no nodes to size a job for")
    per_node = instance.gpus // gpus
    workers, problem = answers.parse_count(
        nodes if args.workers is None else args.workers,
        "--workers",
        "workers",
        nodes * per_node,
        f"what {args.env}'s gpu node group holds at maxSize ({nodes} x {instance.name}, {per_node} worker(s) of "
        f"{plural(gpus, 'GPU')} each)",
    )
    if problem:
        raise InputError(problem)
    return workers, gpus


def plan(root: Path, args) -> tuple[JobSpec, dict, Place]:
    check_options(args)
    environment = render_repository(root, [args.env])[0]
    model = model_job(environment.objects)
    if model is None or environment.cluster_config is None:
        raise InputError(f"--env: {args.env} has no horovod-train MPIJob or no eksctl overlay to model a job on")
    owner = next(
        k for k in environment.kustomizations if any(m.group_kind == MPIJOB and m.doc is model for m in k.objects)
    )
    if not has_kustomization(root / owner.path):
        raise InputError(
            f"{owner.path}: the folder Flux Kustomization {owner.name!r} applies has no "
            "kustomization.yaml to list a new job in; add one"
        )
    place = Place(root, owner.path, args.name)
    if not (root / place.job_file).exists():  # an existing file is new-job's own: see main
        check_name_free(environment.objects, args.name, args.env)
    group = next(
        (
            g
            for g in environment.cluster_config.doc.get("managedNodeGroups") or []
            if isinstance(g, dict) and g.get("name") == "gpu"
        ),
        None,
    )
    instance = catalog.lookup(str(group.get("instanceType"))) if group else None
    if instance is None or instance.gpus == 0:
        raise InputError(
            f"--env: {args.env}'s ClusterConfig has no managed node group gpu of a known GPU instance "
            "type to size the job for"
        )
    if args.workers is None and args.kind != "nccl-tests":
        raise InputError(f"--workers is required for --kind {args.kind}")
    workers, gpus = count_options(args, group, instance)
    problem = answers.check_mpijob_name(args.name, workers)
    if problem:
        raise InputError(problem)
    flags = given_flags(args)
    mount = fsx_mount(model)
    if "data-dir" in flags and mount:
        problem = answers.check_inside(flags["data-dir"], mount, "--data-dir")
        if problem:
            raise InputError(problem)
    switches = tuple(switch for switch in SWITCHES if getattr(args, switch.replace("-", "_")))
    check_trainer_flags(root, args.kind, flags, switches)
    if args.data_format != "features" and args.kind != "train":
        raise InputError(f"--data-format applies to --kind train only (a {args.kind} job reads no data)")
    spec = JobSpec(
        args.name, args.env, workers, gpus, args.image, flags, args.kind, switches, args.data_format, args.floor
    )
    return spec, job_manifest(model, spec, instance, bool(group.get("efaEnabled"))), place


def validator_errors(root: Path, env: str) -> dict[tuple, str]:
    """The validator's errors in `env`, keyed without file lines (adding a resource line shifts them)."""
    from ..validate.pipeline import Options, validate  # only needed here; keeps import time low

    schema_dir = Path(os.environ["GITOPS_SCHEMA_DIR"]) if os.environ.get("GITOPS_SCHEMA_DIR") else None
    result = validate(Options(paths=[root], envs=[env], schema_dir=schema_dir))
    return {
        (f.rule, f.resource, f.message): f"{f.rule}: {f.message} ({f.remediation})"
        for f in result.findings
        if f.severity == "error"
    }


def validator_objections(root: Path, place: Place, job: dict, spec: JobSpec, text: str) -> list[str]:
    """Errors the validator reports after adding the job but not before, checked in a temporary copy."""
    with tempfile.TemporaryDirectory(prefix="new-job-") as scratch:
        copy_root = Path(scratch)
        for name in sorted({*ALWAYS_COPIED, *place.top_folders}):
            source = root / name
            if source.is_dir():
                shutil.copytree(source, copy_root / name, symlinks=True)
            elif source.is_file():
                shutil.copy2(source, copy_root / name)
        before = validator_errors(copy_root, spec.env)
        write_job(copy_root, Place(copy_root, place.folder, spec.name), job, spec, text)
        after = validator_errors(copy_root, spec.env)
    return [line for key, line in after.items() if key not in before]
