"""Training throughput: plain Keras vs the trainer under horovodrun -np 1 vs -np 2, in one run.

    python -m horovod_trainer.bench [--work-dir DIR] [--model cnn] [--epochs 6] [--batch-size 64]

Each configuration trains the same model on the same data for the same number of epochs; samples per
second are counted over all processes from the second epoch on (the first one traces the graph) and
only while batches run (evaluation and checkpoints are not timed). It uses whatever devices
TensorFlow sees: on a GPU machine each Horovod process takes one GPU by local rank.
"""

import json
import os
import subprocess
import sys

from .errors import TrainerError, report_errors
from .local_launch import PACKAGE_ROOT, horovodrun_command, local_env, module_command
from .models import MODEL_NAMES
from .settings import Option, at_least, resolve

PROG = "bench"

OPTIONS = (
    Option("--work-dir", str, "runs/bench", "where data and per-run statistics go"),
    Option("--model", str, "cnn", "model to train", choices=MODEL_NAMES),
    Option("--epochs", int, 6, "epochs per configuration (the first is not timed)", check=at_least(2)),
    Option("--batch-size", int, 64, "samples per step and process", check=at_least(1)),
)


def run(command, label):
    print(f"bench: {label}: {' '.join(command)}", flush=True)
    completed = subprocess.run(command, cwd=PACKAGE_ROOT, env=local_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if completed.returncode != 0:
        tail = "\n".join(completed.stdout.strip().splitlines()[-15:])
        print(tail, file=sys.stderr)
        raise TrainerError(f"{label} failed with exit code {completed.returncode} (output above)")


def read_rate(path, label):
    with open(path, encoding="utf-8") as handle:
        stats = json.load(handle)
    if not stats.get("train_samples_per_second"):
        raise TrainerError(f"{label} measured no throughput (too few epochs?)")
    return stats["train_samples_per_second"], stats.get("device", "?")


def format_table(rows):
    """rows: (label, processes, samples/s, ratio text, device)"""
    header = ("configuration", "processes", "samples/s", "ratio", "device (rank 0)")
    cells = [header] + [(label, str(procs), f"{rate:,.0f}", ratio, device) for label, procs, rate, ratio, device in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    work_dir = os.path.abspath(settings["work_dir"])
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(work_dir, exist_ok=True)
    run(module_command("prepare_data", ["--out-dir", data_dir, "--skip-existing"]), "prepare data")

    common = ["--data-dir", data_dir, "--model", settings["model"], "--epochs", str(settings["epochs"]),
              "--batch-size", str(settings["batch_size"])]
    stats = {name: os.path.join(work_dir, f"{name}.json") for name in ("keras", "np1", "np2")}
    for path in stats.values():
        if os.path.exists(path):
            os.remove(path)

    run(module_command("keras_baseline", common + ["--stats-file", stats["keras"]]), "plain Keras")
    for num_proc in (1, 2):
        name = f"np{num_proc}"
        run(horovodrun_command(num_proc, "train", common + ["--stats-file", stats[name]]), f"horovodrun -np {num_proc}")

    keras_rate, keras_device = read_rate(stats["keras"], "plain Keras")
    np1_rate, np1_device = read_rate(stats["np1"], "horovodrun -np 1")
    np2_rate, np2_device = read_rate(stats["np2"], "horovodrun -np 2")
    print()
    print(
        f"training throughput, model {settings['model']}, batch {settings['batch_size']} per process, "
        f"{settings['epochs']} epochs (first not timed)"
    )
    print(
        format_table(
            [
                ("plain Keras, no Horovod", 1, keras_rate, "1.00", keras_device),
                ("horovodrun -np 1", 1, np1_rate, f"{np1_rate / keras_rate:.2f} x plain Keras", np1_device),
                ("horovodrun -np 2", 2, np2_rate, f"{np2_rate / np1_rate:.2f} x -np 1", np2_device),
            ]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
