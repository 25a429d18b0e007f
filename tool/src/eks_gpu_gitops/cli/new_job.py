"""Add a training job (an MPIJob) to an environment."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import InputError
from ..facts.nccl_tests import MESSAGE_SIZE
from ..generate.files import write_all
from ..generate.job import IMAGENET_DIR, KINDS, floor_line, parse_floor
from ..generate.new_job import (
    KIND_FLAGS,
    SWITCHES,
    TRAINER_FLAGS,
    job_text,
    list_job,
    plan,
    validator_objections,
    write_job,
)
from ..render.repository import repository_root
from . import conventions as cli

VERB = "new-job"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument(
        "name", help="job name: a DNS-1035 label that leaves <name>-worker-<workers-1> at most 63 characters"
    )
    parser.add_argument("--env", required=True)
    parser.add_argument(
        "--workers",
        help="MPI workers (pods), at most what the gpu group holds at maxSize; nccl-tests: default every GPU node "
        "(the gpu group's maxSize)",
    )
    parser.add_argument(
        "--gpus-per-worker", help="1 to the GPUs of the environment's instance type; default: all of them"
    )
    parser.add_argument(
        "--image",
        help="an image reference the kubelet can pull ([registry/]repository[:tag][@digest]); default: follow the "
        "image of the environment's horovod-train job (moves when newTag in overlays/base/training changes)",
    )
    parser.add_argument("--kind", choices=sorted(KINDS), default="train", help="default: train")
    parser.add_argument(
        "--data-format",
        choices=("features", "imagenet"),
        default="features",
        help="train: imagenet reads ImageNet-layout TFRecords already on FSx (--data-dir, default "
        f"{IMAGENET_DIR}), indexed by the init container; default: the bundled digits",
    )
    parser.add_argument(
        "--floor",
        metavar="GBPS",
        help=f"nccl-tests: the least all_reduce bus bandwidth at {MESSAGE_SIZE} B (1 GiB) the job passes with, in "
        "GB/s; default: the instance type's published floor when the workers are 2 whole nodes on EFA "
        "(docs/operations.md, Acceptance test)",
    )
    for flag in TRAINER_FLAGS:
        kinds = [kind for kind, flags in KIND_FLAGS.items() if flag in flags]
        where = ", a folder inside the FSx mount (/fsx)" if flag == "data-dir" else ""
        parser.add_argument(f"--{flag}", help=f"trainer --{flag} ({', '.join(kinds)}){where}")
    for switch in SWITCHES:
        parser.add_argument(f"--{switch}", action="store_true", help=f"trainer --{switch}")
    return parser


def parse_args(argv):
    parser = build_parser()
    return parser.parse_args(argv)


def _new_job(argv: list[str] | None) -> int:
    args = parse_args(argv)
    if args.floor is not None:
        if args.kind != "nccl-tests":
            raise InputError(
                f"--floor applies to --kind nccl-tests only (the fabric check's pass mark), not {args.kind}"
            )
        args.floor = parse_floor(args.floor)
    root = repository_root(Path.cwd())
    spec, job, place = plan(root, args)
    text = job_text(job, spec)
    job_file = root / place.job_file
    if job_file.exists():
        if job_file.read_text() == text:
            kustomization = list_job(root, place, job, spec)
            if kustomization != (root / place.kustomization).read_text():
                write_all(root, {place.kustomization: kustomization})
            print(f"{place.job_file} is already there with these settings; nothing to do")
            return 0
        raise InputError(
            f"NAME: job {spec.name!r} already exists in {spec.env} ({place.job_file}) "
            "with other settings; edit it or choose another name"
        )
    objections = validator_objections(root, place, job, spec, text)
    if objections:
        raise InputError(objections[0])
    write_job(root, place, job, spec, text)
    print(f"wrote {place.job_file} and listed it in {place.kustomization}", file=sys.stdout)
    if spec.kind == "nccl-tests":
        print(floor_line(job, spec), file=sys.stdout)
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _new_job, argv)
