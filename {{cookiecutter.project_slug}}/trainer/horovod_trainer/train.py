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
from .models import MODEL_NAMES
from .settings import Option, at_least, between, parse_switch, positive, resolve

PROG = "train"

OPTIONS = (
    Option("--data-dir", str, None, "directory written by prepare_data (required)"),
    Option("--model", str, "mlp", "model to train", choices=MODEL_NAMES),
    Option("--epochs", int, 10, "total epochs, counting those done before a resume", check=at_least(1)),
    Option("--batch-size", int, 32, "samples per step on each worker", check=at_least(1)),
    Option("--base-lr", float, 0.001, "learning rate of one worker; multiplied by the world size", check=positive),
    Option("--warmup-epochs", float, 1.0, "epochs of linear ramp from base-lr to base-lr * size", check=at_least(0)),
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
    epochs: int
    batch_size: int
    base_lr: float
    warmup_epochs: float
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
    data = manifest.load(values.pop("data_dir"))
    return TrainConfig(data=data, **values)


@report_errors(PROG)
def main(argv=None):
    config = load_config(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    from .job import run_training  # TensorFlow and Horovod load here, after the settings are known good

    return run_training(config)


if __name__ == "__main__":
    sys.exit(main())
