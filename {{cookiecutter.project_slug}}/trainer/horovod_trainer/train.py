"""Train a model on the prepared TFRecords with Horovod (one process per GPU, or several on CPU).

    horovodrun -np 2 -H localhost:2 --gloo python -m horovod_trainer.train --data-dir DIR ...
    mpirun -np N ... python -m horovod_trainer.train --data-dir /fsx/data ...

Settings are checked before TensorFlow is imported; a bad one ends the process with exit code 2 and one
line on stderr.
"""

import dataclasses
import os
import sys

from . import manifest
from .errors import TrainerError, report_errors
from .models import MODEL_NAMES, uses_batch_norm
from .schedule import SCHEDULES, parse_epochs
from .settings import Option, at_least, between, parse_switch, positive, resolve
from .sharding import LAST_BATCH

PROG = "train"

OPTIONS = (
    Option("--data-dir", str, None, "directory written by prepare_data (required)"),
    Option("--model", str, "mlp", "model to train", choices=MODEL_NAMES),
    Option("--width", float, 1.0, "resnet50: channels x this (1.0: the standard network)", check=between(0.01, 4.0)),
    Option("--image-size", int, 224, "imagenet layout: side of the square crops, in pixels", check=at_least(16)),
    Option("--epochs", int, 10, "total epochs, counting those done before a resume", check=at_least(1)),
    Option("--batch-size", int, 32, "samples per step on each worker", check=at_least(1)),
    Option("--base-lr", float, 0.001, "learning rate of one worker; multiplied by the world size", check=positive),
    Option("--warmup-epochs", float, 1.0, "epochs of linear ramp from base-lr to the peak rate", check=at_least(0)),
    Option("--lr-schedule", str, "constant", "after the warm-up", choices=SCHEDULES),
    Option(
        "--lr-decay-epochs",
        parse_epochs,
        (),
        "step schedule: epochs at which the rate is multiplied (e.g. 30,60,80)",
        kind="increasing epochs separated by commas",
    ),
    Option("--lr-decay-factor", float, 0.1, "step schedule: the factor", check=between(0.0, 1.0)),
    Option("--optimizer", str, "adam", "optimizer", choices=("adam", "sgd")),
    Option("--momentum", float, 0.9, "sgd: momentum", check=between(0.0, 1.0)),
    Option(
        "--weight-decay",
        float,
        0.0,
        "decoupled weight decay (batch-norm and bias variables excluded)",
        check=at_least(0),
    ),
    Option(
        "--last-batch",
        str,
        "auto",
        "make equal step counts by padding with weight-0 filler or by leaving the remainder out "
        "(auto: drop for batch-norm models, pad otherwise)",
        choices=("auto", *LAST_BATCH),
    ),
    Option("--mixed-precision", parse_switch, False, "mixed_float16 with dynamic loss scaling", is_switch=True),
    Option("--xla", parse_switch, False, "compile the forward and backward pass with XLA", is_switch=True),
    Option("--fp16-allreduce", parse_switch, False, "Horovod: send gradients as float16", is_switch=True),
    Option(
        "--backward-passes-per-step",
        int,
        1,
        "Horovod: add up this many local gradients before each allreduce",
        check=at_least(1),
    ),
    Option(
        "--gradient-predivide-factor",
        float,
        1.0,
        "Horovod: divide gradients by this before the sum and by size/this after it",
        check=positive,
    ),
    Option("--checkpoint-dir", str, None, "save checkpoints here and resume from the latest one"),
    Option("--log-dir", str, None, "write TensorBoard logs here (rank 0)"),
    Option("--seed", int, 0, "seed for weights and shuffling", check=at_least(0)),
    Option(
        "--checkpoint-every-steps",
        int,
        0,
        "also checkpoint every N steps within an epoch (0: at epoch ends only)",
        check=at_least(0),
    ),
    Option("--elastic", parse_switch, False, "elastic training (launch with horovodrun --min-np ...)", is_switch=True),
    Option("--keep-checkpoints", int, 3, "how many of the newest checkpoints to keep", check=at_least(1)),
    Option("--shuffle-buffer", int, 10_000, "shuffle buffer of each rank, in samples", check=at_least(1)),
    Option(
        "--target-accuracy",
        float,
        0.0,
        "exit with code 1 if the final eval accuracy is below this (0: no check)",
        check=between(0.0, 1.0),
    ),
    Option("--stats-file", str, None, "write a JSON summary of the run here (rank 0)"),
)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    data: manifest.Manifest
    model: str
    width: float
    image_size: int
    epochs: int
    batch_size: int
    base_lr: float
    warmup_epochs: float
    lr_schedule: str
    lr_decay_epochs: tuple[float, ...]
    lr_decay_factor: float
    optimizer: str
    momentum: float
    weight_decay: float
    last_batch: str
    mixed_precision: bool
    xla: bool
    fp16_allreduce: bool
    backward_passes_per_step: int
    gradient_predivide_factor: float
    checkpoint_dir: str | None
    log_dir: str | None
    seed: int
    checkpoint_every_steps: int
    elastic: bool
    keep_checkpoints: int
    shuffle_buffer: int
    target_accuracy: float
    stats_file: str | None


def _check_output_dir(flag, path):
    if path and os.path.exists(path) and not os.path.isdir(path):
        raise TrainerError(f"{flag} {path} exists and is not a directory")


def load_config(argv=None, environ=None) -> TrainConfig:
    values = resolve(
        OPTIONS, argv, environ, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0]
    )
    if not values["data_dir"]:
        raise TrainerError("--data-dir (or TRAINER_DATA_DIR) is required")
    _check_output_dir("--checkpoint-dir", values["checkpoint_dir"])
    _check_output_dir("--log-dir", values["log_dir"])
    check_combinations(values)
    values["last_batch"] = _last_batch(values["model"], values["last_batch"])
    data = manifest.load(values.pop("data_dir"))
    return TrainConfig(data=data, **values)


def check_combinations(values):
    """Settings that are fine alone but not together; raises TrainerError. (new-job runs this too.)"""
    _last_batch(values["model"], values["last_batch"])
    if values["lr_schedule"] == "step" and not values["lr_decay_epochs"]:
        raise TrainerError("--lr-schedule step needs --lr-decay-epochs (e.g. 30,60,80)")
    if values["backward_passes_per_step"] > 1:
        # Between allreduces Horovod returns local gradients: a loss-scale check on them differs per
        # rank, and an elastic reset loses its place in the accumulation cycle.
        for switch in ("mixed_precision", "elastic"):
            if values[switch]:
                raise TrainerError(
                    f"--backward-passes-per-step above 1 cannot be combined with --{switch.replace('_', '-')}: "
                    "the ranks would fall out of step"
                )


def default_last_batch(model):
    return "drop" if uses_batch_norm(model) else "pad"


def _last_batch(model, choice):
    if choice == "auto":
        return default_last_batch(model)
    if choice == "pad" and uses_batch_norm(model):
        raise TrainerError(
            f"--last-batch pad cannot train {model}: its batch normalisation would average the weight-0 "
            "filler samples into its statistics; use --last-batch drop (or auto)"
        )
    return choice


XLA_FLAGS = ("--tf_xla_auto_jit=2", "--tf_xla_cpu_global_jit")


def use_xla_auto_clustering(environ):
    """XLA by auto-clustering, set before TensorFlow loads.

    `jit_compile=True` compiles the whole train step, and Horovod's allreduce has no XLA kernel
    (TensorFlow refuses: "Detected unsupported operations ... HorovodAllreduce"). Auto-clustering
    compiles the forward and backward pass in clusters and leaves Horovod's ops outside them; the
    second flag extends it from GPUs to the CPU.
    """
    flags = environ.get("TF_XLA_FLAGS", "").split()
    environ["TF_XLA_FLAGS"] = " ".join(flags + [flag for flag in XLA_FLAGS if flag not in flags])


@report_errors(PROG)
def main(argv=None):
    config = load_config(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if config.xla:
        use_xla_auto_clustering(os.environ)
    from .job import run_training  # TensorFlow and Horovod load here, after the settings are known good

    return run_training(config)


if __name__ == "__main__":
    sys.exit(main())
