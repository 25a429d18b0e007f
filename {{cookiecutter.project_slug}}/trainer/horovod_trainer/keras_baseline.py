"""The benchmark's reference: the trainer's model and input pipeline in plain Keras, no Horovod.

    python -m horovod_trainer.keras_baseline --data-dir DIR --stats-file FILE [--model cnn ...]

Same model, optimizer, batch size, data order and throughput meter as `train` with one process; only
Horovod (DistributedOptimizer, callbacks, collectives) is left out.
"""

import json
import os
import sys

from . import manifest, train
from .errors import TrainerError, report_errors
from .settings import Option, at_least, resolve

PROG = "keras_baseline"

_SHARED = {option.flag: option for option in train.OPTIONS}
OPTIONS = (
    *(
        _SHARED[flag]
        for flag in ("--data-dir", "--model", "--width", "--image-size", "--batch-size", "--base-lr", "--seed")
    ),
    _SHARED["--stats-file"],
    Option("--epochs", int, 5, "epochs (the first is not timed)", check=at_least(2)),
)


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    for required in ("data_dir", "stats_file"):  # optional for train, required here
        if not settings[required]:
            raise TrainerError(f"--{required.replace('_', '-')} is required")
    data = manifest.load(settings["data_dir"])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

    import tensorflow as tf

    from . import atomic, devices, input_pipeline, models, sharding
    from .callbacks import ThroughputMeter

    device = devices.configure()
    tf.keras.utils.set_random_seed(settings["seed"])

    batch_size = settings["batch_size"]
    last_batch = train.default_last_batch(settings["model"])
    plan = sharding.plan_rank([shard.samples for shard in data.shards("train")], 1, 0, batch_size, last_batch)
    model = models.build_model(
        settings["model"], models.input_shape(data, settings["image_size"]), data.num_classes, settings["width"]
    )
    models.compile_model(model, tf.keras.optimizers.Adam(learning_rate=settings["base_lr"]))
    meter = ThroughputMeter(batch_size)
    decoding = input_pipeline.Decoding(settings["image_size"], devices.cores_per_process())
    batches = input_pipeline.train_batches(data, plan, settings["seed"], 0, settings["epochs"], decoding=decoding)
    # Validation each epoch, as the trainer does: it is not timed, but it lets the input pipeline
    # read ahead between epochs in both runs alike.
    eval_plan = sharding.plan_rank([shard.samples for shard in data.shards("eval")], 1, 0, batch_size)
    model.fit(
        batches,
        steps_per_epoch=plan.steps_per_epoch,
        epochs=settings["epochs"],
        validation_data=input_pipeline.eval_batches(data, eval_plan, decoding),
        callbacks=[meter],
        verbose=0,
    )

    stats = {
        "train_samples_per_second": meter.samples_per_second,
        "device": device,
    }
    atomic.write_text(settings["stats_file"], json.dumps(stats, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
