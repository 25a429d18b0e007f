"""Write a data set as sharded TFRecords (nothing is downloaded).

    python -m horovod_trainer.prepare_data --out-dir DIR [--format features|imagenet] [--shards N] [--skip-existing]

`--format features` (default): scikit-learn's bundled digits, as flat float features.
`--format imagenet`: a small synthetic set in the ImageNet TFRecord layout (JPEG files of generated
images, `train-*-of-*` and `validation-*-of-*`, see synthetic_images.py); for a real ImageNet
directory use `python -m horovod_trainer.index_data` instead.

Samples are shuffled once with a fixed seed, split into train and eval, and written in that order.
Each shard is written under a temporary name and renamed; manifest.json is written last, the same way,
so a reader that finds the manifest finds complete shards.
"""

import glob
import json
import os
import sys

from . import atomic
from . import manifest as manifest_mod
from .errors import TrainerError, report_errors
from .settings import Option, at_least, between, parse_switch, resolve

PROG = "prepare_data"
SOURCE = "sklearn.datasets.load_digits"
SYNTHETIC_SOURCE = "horovod_trainer.synthetic_images"
# build_imagenet_data.py numbers the 1000 classes from 1 (0 was "background"); the synthetic set does too.
IMAGENET_LABEL_OFFSET = 1
JPEG_QUALITY = 90

OPTIONS = (
    Option("--out-dir", str, None, "directory to write the shards and manifest.json into (required)"),
    Option("--format", str, "features", "record layout and data set", choices=("features", "imagenet")),
    Option("--classes", int, 10, "imagenet format: number of classes", check=between(2, 1000)),
    Option("--images", int, 1280, "imagenet format: number of images, train and eval together", check=at_least(20)),
    Option("--shards", int, 8, "number of files per split", check=between(1, 1000)),
    Option("--eval-fraction", float, 0.2, "fraction of samples held out for evaluation", check=between(0.05, 0.5)),
    Option("--seed", int, 0, "seed of the one-time shuffle", check=at_least(0)),
    Option(
        "--skip-existing",
        parse_switch,
        False,
        "do nothing if DIR already holds a complete data set",
        is_switch=True,
    ),
)


def load_digits_split(eval_fraction, seed):
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype("float32").reshape(len(digits.images), -1)
    labels = digits.target.astype("int64")
    order = np.random.default_rng(seed).permutation(len(labels))
    images, labels = images[order], labels[order]
    num_eval = int(round(len(labels) * eval_fraction))
    return (
        {
            "train": (images[num_eval:], labels[num_eval:]),
            "eval": (images[:num_eval], labels[:num_eval]),
        },
        (8, 8, 1),
        10,
    )


def split_evenly(count, parts):
    """Boundaries of `parts` contiguous chunks whose sizes differ by at most one."""
    base, extra = divmod(count, parts)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def write_shards(out_dir, split, records, shards, layout):
    """records: a list of serialized Examples, written in order over `shards` files."""
    import tensorflow as tf

    written = []
    for index, (start, stop) in enumerate(split_evenly(len(records), shards)):
        name = manifest_mod.shard_name(split, index, shards, layout)

        def write_to(path, start=start, stop=stop):
            with tf.io.TFRecordWriter(path) as writer:
                for record in records[start:stop]:
                    writer.write(record)

        atomic.write_file(os.path.join(out_dir, name), write_to)
        written.append((name, stop - start))
    return written


def digits_records(settings):
    from .records import encode

    splits, feature_shape, num_classes = load_digits_split(settings["eval_fraction"], settings["seed"])
    records = {}
    for split, (images, labels) in splits.items():
        pairs = enumerate(zip(images, labels, strict=True))
        records[split] = [encode(image, label, sample_id) for sample_id, (image, label) in pairs]
    return records, {"source": SOURCE, "feature_shape": feature_shape, "num_classes": num_classes}


def synthetic_imagenet_records(settings):
    import tensorflow as tf

    from . import synthetic_images
    from .records import encode_imagenet

    classes, count = settings["classes"], settings["images"]
    num_eval = int(round(count * settings["eval_fraction"]))
    records = {"train": [], "eval": []}
    for index, (image, label) in enumerate(synthetic_images.generate(count, classes, settings["seed"])):
        split, number = ("eval", index) if index < num_eval else ("train", index - num_eval)
        jpeg = tf.io.encode_jpeg(image, quality=JPEG_QUALITY).numpy()
        name = f"synthetic_{manifest_mod.FILE_PREFIXES['imagenet'][split]}_{number:08d}.JPEG"
        stored_label = label + IMAGENET_LABEL_OFFSET
        records[split].append(
            encode_imagenet(jpeg, stored_label, image.shape[0], image.shape[1], name, f"n{stored_label:08d}")
        )
    return records, {
        "source": SYNTHETIC_SOURCE,
        "feature_shape": (),
        "num_classes": classes,
        "label_offset": IMAGENET_LABEL_OFFSET,
    }


def remove_stale_shards(out_dir, keep):
    for layout, prefixes in manifest_mod.FILE_PREFIXES.items():
        for prefix in prefixes.values():
            pattern = f"{prefix}-*-of-*{manifest_mod.FILE_SUFFIXES[layout]}*"
            for path in glob.glob(os.path.join(out_dir, pattern)):
                if os.path.basename(path) not in keep:
                    os.remove(path)


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    out_dir = settings["out_dir"]
    if not out_dir:
        raise TrainerError("--out-dir (or TRAINER_OUT_DIR) is required")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise TrainerError(f"--out-dir {out_dir} exists and is not a directory")
    if settings["skip_existing"]:
        existing = manifest_mod.complete(out_dir, settings["format"])
        if existing is not None:
            print(
                f"{out_dir} already holds {existing.num_samples('train')} train and "
                f"{existing.num_samples('eval')} eval samples; skipping"
            )
            return 0
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise TrainerError(f"cannot create --out-dir {out_dir}: {exc.strerror}") from None

    # Readers must not pair an old manifest with new shards while they are rewritten.
    old_manifest = os.path.join(out_dir, manifest_mod.MANIFEST_NAME)
    if os.path.exists(old_manifest):
        os.remove(old_manifest)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    layout = settings["format"]
    make_records = synthetic_imagenet_records if layout == "imagenet" else digits_records
    records, description = make_records(settings)
    written = {
        split: write_shards(out_dir, split, split_records, settings["shards"], layout)
        for split, split_records in records.items()
    }
    table = manifest_mod.to_json(splits=written, layout=layout, **description)
    text = json.dumps(table, indent=2) + "\n"
    atomic.write_text(os.path.join(out_dir, manifest_mod.MANIFEST_NAME), text)
    remove_stale_shards(out_dir, {name for shards in written.values() for name, _ in shards})
    counts = ", ".join(f"{sum(n for _, n in shards)} {split}" for split, shards in written.items())
    print(f"wrote {counts} samples in {settings['shards']} shards per split to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
