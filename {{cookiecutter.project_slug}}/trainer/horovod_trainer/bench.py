"""Training throughput: plain Keras vs the trainer under horovodrun -np 1 vs -np 2, in one run.

    python -m horovod_trainer.bench [--work-dir DIR] [--model cnn] [--epochs 6] [--batch-size 64] [--rounds N]
    python -m horovod_trainer.bench --data-format imagenet --model resnet50 --width 0.25 --image-size 64 ...

Each configuration trains the same model on the same data for the same number of epochs; samples per
second are counted over all processes from the second epoch on (the first one traces the graph) and
only while batches run (evaluation and checkpoints are not timed). It uses whatever devices
TensorFlow sees: on a GPU machine each Horovod process takes one GPU by local rank.
"""

import dataclasses
import json
import os
import statistics
import subprocess
import sys

from .errors import TrainerError, report_errors
from .local_launch import PACKAGE_ROOT, horovodrun_command, local_env, module_command
from .models import MODEL_NAMES
from .settings import Option, at_least, between, resolve

PROG = "bench"

OPTIONS = (
    Option("--work-dir", str, "runs/bench", "where data and per-run statistics go"),
    Option("--model", str, "cnn", "model to train", choices=MODEL_NAMES),
    Option(
        "--data-format",
        str,
        "features",
        "prepare_data --format of the data trained on",
        choices=("features", "imagenet"),
    ),
    Option("--width", float, 1.0, "resnet50: channels x this", check=between(0.01, 4.0)),
    Option("--image-size", int, 224, "imagenet format: side of the crops", check=at_least(16)),
    Option("--epochs", int, 6, "epochs per configuration (the first is not timed)", check=at_least(2)),
    Option("--batch-size", int, 64, "samples per step and process", check=at_least(1)),
    Option(
        "--rounds", int, 1, "run the three configurations this many times, in turn; report medians", check=at_least(1)
    ),
)


@dataclasses.dataclass(frozen=True)
class Configuration:
    name: str
    label: str
    processes: int

    def command(self, args):
        if self.name == "keras":
            return module_command("keras_baseline", args)
        return horovodrun_command(self.processes, "train", args)


CONFIGURATIONS = (
    Configuration("keras", "plain Keras, no Horovod", 1),
    Configuration("np1", "horovodrun -np 1", 1),
    Configuration("np2", "horovodrun -np 2", 2),
)


def run(command, label):
    print(f"bench: {label}: {' '.join(command)}", flush=True)
    completed = subprocess.run(
        command, cwd=PACKAGE_ROOT, env=local_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if completed.returncode != 0:
        tail = "\n".join(completed.stdout.strip().splitlines()[-15:])
        print(tail, file=sys.stderr)
        raise TrainerError(f"{label} failed with exit code {completed.returncode} (output above)")


def measure(configuration, args, stats_file):
    if os.path.exists(stats_file):
        os.remove(stats_file)
    run(configuration.command(args + ["--stats-file", stats_file]), configuration.label)
    with open(stats_file, encoding="utf-8") as handle:
        stats = json.load(handle)
    if not stats.get("train_samples_per_second"):
        raise TrainerError(f"{configuration.label} measured no throughput (too few epochs?)")
    return stats["train_samples_per_second"], stats.get("device", "?")


def format_table(rows):
    """rows: (label, processes, samples/s, ratio text, device)"""
    header = ("configuration", "processes", "samples/s", "ratio", "device (rank 0)")
    cells = [header] + [
        (label, str(procs), f"{rate:,.0f}", ratio, device) for label, procs, rate, ratio, device in rows
    ]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    work_dir = os.path.abspath(settings["work_dir"])
    data_dir = os.path.join(work_dir, f"data-{settings['data_format']}")
    os.makedirs(work_dir, exist_ok=True)
    run(
        module_command("prepare_data", ["--out-dir", data_dir, "--format", settings["data_format"], "--skip-existing"]),
        "prepare data",
    )

    args = ["--data-dir", data_dir, "--model", settings["model"]]
    args += ["--width", str(settings["width"]), "--image-size", str(settings["image_size"])]
    args += ["--epochs", str(settings["epochs"]), "--batch-size", str(settings["batch_size"])]
    rates = {configuration.name: [] for configuration in CONFIGURATIONS}
    devices = {}
    # In turn rather than one configuration after another, so that a slow spell of a shared machine
    # does not land on one configuration only.
    for _ in range(settings["rounds"]):
        for configuration in CONFIGURATIONS:
            rate, devices[configuration.name] = measure(
                configuration, args, os.path.join(work_dir, f"{configuration.name}.json")
            )
            rates[configuration.name].append(rate)
    median = {name: statistics.median(values) for name, values in rates.items()}

    width = f" (width {settings['width']:g})" if settings["model"] == "resnet50" else ""
    print()
    print(
        f"training throughput, model {settings['model']}"
        f"{width}"
        f" on {settings['data_format']} data, batch {settings['batch_size']} per process, "
        f"{settings['epochs']} epochs (first not timed), median of {settings['rounds']} round(s)"
    )
    ratios = {
        "keras": "1.00",
        "np1": f"{median['np1'] / median['keras']:.2f} x plain Keras",
        "np2": f"{median['np2'] / median['np1']:.2f} x -np 1",
    }
    rows = [(c.label, c.processes, median[c.name], ratios[c.name], devices[c.name]) for c in CONFIGURATIONS]
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
