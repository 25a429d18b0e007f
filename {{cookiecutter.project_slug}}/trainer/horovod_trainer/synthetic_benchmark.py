"""Training throughput on synthetic data: images/s per GPU, for the job, and the scaling efficiency.

    mpirun -np N ... python -m horovod_trainer.synthetic_benchmark [--model resnet50] [--batch-size 64]
    horovodrun -np 2 -H localhost:2 --gloo python -m horovod_trainer.synthetic_benchmark --width 0.25 ...

In the manner of Horovod's TensorFlow 2 synthetic benchmark (examples/tensorflow2/
tensorflow2_synthetic_benchmark.py in horovod v0.28.1): one fixed batch of random images, a custom
training step, warm-up batches, then `--num-iters` timed iterations of `--num-batches-per-iter`
batches. Nothing is read from disk, so this measures compute and communication only.

Two phases, every rank taking part in both at the same time:

1. alone: each process trains on its own GPU with no communication. This is the one-GPU figure, taken
   while the node's other GPUs are just as busy (shared host CPUs, PCIe, power), as in the real job.
2. horovod: the same step with the gradients averaged by Horovod over all processes.

Scaling efficiency = horovod images/s per GPU / alone images/s per GPU. Rank 0 prints the table.
"""

import json
import os
import statistics
import sys
import time

from .errors import TrainerError, report_errors
from .models import MODEL_NAMES
from .settings import Option, at_least, between, parse_switch, resolve

PROG = "synthetic_benchmark"

OPTIONS = (
    Option("--model", str, "resnet50", "model to time", choices=MODEL_NAMES),
    Option("--width", float, 1.0, "resnet50: channels x this", check=between(0.01, 4.0)),
    Option("--image-size", int, 224, "side of the square images", check=at_least(16)),
    Option("--num-classes", int, 1000, "classes of the output layer", check=at_least(2)),
    Option("--batch-size", int, 64, "images per step on each GPU", check=at_least(1)),
    Option("--num-warmup-batches", int, 10, "untimed batches before each phase", check=at_least(1)),
    Option("--num-batches-per-iter", int, 10, "batches per timed iteration", check=at_least(1)),
    Option("--num-iters", int, 10, "timed iterations per phase", check=at_least(2)),
    Option("--mixed-precision", parse_switch, False, "mixed_float16 with loss scaling", is_switch=True),
    Option("--xla", parse_switch, False, "XLA auto-clustering (see train.py)", is_switch=True),
    Option("--fp16-allreduce", parse_switch, False, "Horovod: send gradients as float16", is_switch=True),
    Option("--stats-file", str, None, "write the results as JSON here (rank 0)"),
)


def mean_and_interval(rates):
    """Mean and the half-width of a 95% interval (1.96 standard deviations), as Horovod's benchmark prints."""
    mean = statistics.fmean(rates)
    return mean, 1.96 * statistics.stdev(rates) if len(rates) > 1 else 0.0


def format_table(title, rows):
    """rows: (phase, processes, per-GPU text, total text, efficiency text)"""
    header = ("phase", "processes", "img/s per GPU", "img/s total", "scaling efficiency")
    cells = [header, *rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join([title, *lines])


class Benchmark:
    def __init__(self, settings):
        import horovod.tensorflow as hvd
        import tensorflow as tf

        from . import devices, models

        self.settings, self.hvd, self.tf = settings, hvd, tf
        hvd.init()
        self.device = devices.configure(hvd.local_rank(), hvd.local_size())
        if settings["mixed_precision"]:
            tf.keras.mixed_precision.set_global_policy("mixed_float16")
        size, batch = settings["image_size"], settings["batch_size"]
        shape = (size, size, 3) if settings["model"] == "resnet50" else (size, size, 1)
        self.model = models.build_model(settings["model"], shape, settings["num_classes"], settings["width"])
        self.optimizer = tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        if settings["mixed_precision"]:
            self.optimizer = tf.keras.mixed_precision.LossScaleOptimizer(self.optimizer)
        self.loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.images = tf.random.uniform((batch, *shape))
        self.labels = tf.random.uniform((batch,), maxval=settings["num_classes"], dtype=tf.int64)
        compression = hvd.Compression.fp16 if settings["fp16_allreduce"] else hvd.Compression.none
        self.steps = {
            "alone": tf.function(lambda: self._step(None)),
            "horovod": tf.function(lambda: self._step(compression)),
        }

    def _step(self, compression):
        tf = self.tf
        with tf.GradientTape() as tape:
            loss = self.loss(self.labels, self.model(self.images, training=True))
            scaled = self.optimizer.get_scaled_loss(loss) if self.settings["mixed_precision"] else loss
        if compression is not None:
            tape = self.hvd.DistributedGradientTape(tape, compression=compression)
        gradients = tape.gradient(scaled, self.model.trainable_variables)
        if self.settings["mixed_precision"]:
            gradients = self.optimizer.get_unscaled_gradients(gradients)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables, strict=False))
        return loss

    def run_phase(self, name):
        """Images/s of this process in each timed iteration of phase `name`."""
        settings, step = self.settings, self.steps[name]
        self.hvd.broadcast_object(name, root_rank=0, name=f"start.{name}")  # every rank starts together
        for _ in range(settings["num_warmup_batches"]):
            step()
        rates = []
        for _ in range(settings["num_iters"]):
            started = time.perf_counter()
            for _ in range(settings["num_batches_per_iter"]):
                loss = step()
            loss.numpy()  # wait for the device
            rates.append(settings["batch_size"] * settings["num_batches_per_iter"] / (time.perf_counter() - started))
        return rates

    def run(self):
        hvd = self.hvd
        # One set of starting weights and optimizer slots on every rank, as in training.
        self.steps["alone"]()
        hvd.broadcast_variables(self.model.variables, root_rank=0)
        hvd.broadcast_variables(self.optimizer.variables, root_rank=0)
        results = {}
        for phase in ("alone", "horovod"):
            per_rank = hvd.allgather_object(statistics.fmean(self.run_phase(phase)))
            results[phase] = per_rank
        return results


def report(settings, results, size, device):
    alone, horovod = results["alone"], results["horovod"]
    alone_mean, alone_ci = mean_and_interval(alone)
    horovod_mean, horovod_ci = mean_and_interval(horovod)
    efficiency = horovod_mean / alone_mean
    precision = "mixed_float16" if settings["mixed_precision"] else "float32"
    width = "" if settings["width"] == 1.0 else f" (width {settings['width']:g})"
    title = (
        f"synthetic benchmark: {settings['model']}"
        f"{width}, "
        f"{settings['image_size']}x{settings['image_size']}, batch {settings['batch_size']} per GPU, {precision}, "
        f"XLA {'on' if settings['xla'] else 'off'}; {size} process(es), rank 0 on {device}; "
        f"mean over processes of {settings['num_iters']} iterations x {settings['num_batches_per_iter']} batches"
    )
    rows = [
        (
            "alone (one GPU, no communication)",
            str(size),
            f"{alone_mean:,.1f} +-{alone_ci:,.1f}",
            f"{sum(alone):,.1f}",
            "1.00",
        ),
        (
            "horovod (allreduce)",
            str(size),
            f"{horovod_mean:,.1f} +-{horovod_ci:,.1f}",
            f"{sum(horovod):,.1f}",
            f"{efficiency:.2f}",
        ),
    ]
    stats = {
        "settings": {key: value for key, value in settings.items() if key != "stats_file"},
        "processes": size,
        "device": device,
        "images_per_second_per_gpu": {"alone": alone_mean, "horovod": horovod_mean},
        "images_per_second_total": {"alone": sum(alone), "horovod": sum(horovod)},
        "per_rank": results,
        "scaling_efficiency": efficiency,
    }
    return format_table(title, rows), stats


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    if settings["stats_file"] and os.path.isdir(settings["stats_file"]):
        raise TrainerError(f"--stats-file {settings['stats_file']} is a directory")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if settings["xla"]:
        from .train import use_xla_auto_clustering

        use_xla_auto_clustering(os.environ)
    benchmark = Benchmark(settings)
    if benchmark.hvd.rank() == 0:
        print(f"{PROG}: {benchmark.hvd.size()} process(es); warming up and timing two phases", flush=True)
    results = benchmark.run()
    if benchmark.hvd.rank() == 0:
        table, stats = report(settings, results, benchmark.hvd.size(), benchmark.device)
        print(table, flush=True)
        if settings["stats_file"]:
            from . import atomic

            atomic.write_text(settings["stats_file"], json.dumps(stats, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
