"""Write manifest.json for an existing directory in the ImageNet TFRecord layout.

    python -m horovod_trainer.index_data --data-dir DIR [--num-classes 1000] [--label-offset 1] [--skip-existing]

The trainer needs the sample count of every shard to give each rank an equal share without reading
the data; this counts the records of `train-*-of-*` and `validation-*-of-*` once, several files at a
time, and writes the manifest last (atomically). On ImageNet (1024 + 128 files, about 150 GB) it reads
every file once: run it once, for example from the launcher's init container with `--skip-existing`.
"""

import concurrent.futures
import json
import os
import re
import sys
import time

from . import atomic
from . import manifest as manifest_mod
from .errors import TrainerError, report_errors
from .settings import Option, at_least, between, parse_switch, resolve

PROG = "index_data"
SOURCE = "index_data"
_SHARD = re.compile(r"^(train|validation)-(\d{5})-of-(\d{5})$")
SPLIT_OF_PREFIX = {prefix: split for split, prefix in manifest_mod.FILE_PREFIXES["imagenet"].items()}

OPTIONS = (
    Option("--data-dir", str, None, "directory holding train-*-of-* and validation-*-of-* (required)"),
    Option("--num-classes", int, 1000, "number of classes", check=between(2, 100_000)),
    Option(
        "--label-offset",
        int,
        1,
        "subtracted from image/class/label to give a class index (1: labels 1..1000, as build_imagenet_data.py writes)",
        check=at_least(0),
    ),
    Option("--threads", int, 8, "files counted at the same time", check=at_least(1)),
    Option(
        "--skip-existing", parse_switch, False, "do nothing if DIR already has an imagenet manifest", is_switch=True
    ),
)


def find_shards(data_dir):
    """{split: [file name, ...]} of the imagenet layout, each split complete (every index of its count)."""
    found = {"train": [], "eval": []}
    counts = {}
    for name in sorted(os.listdir(data_dir)):
        match = _SHARD.match(name)
        if match:
            split = SPLIT_OF_PREFIX[match.group(1)]
            found[split].append(name)
            counts.setdefault(split, set()).add(int(match.group(3)))
    for split, names in found.items():
        prefix = manifest_mod.FILE_PREFIXES["imagenet"][split]
        if not names:
            raise TrainerError(f"{data_dir} has no {prefix}-NNNNN-of-NNNNN files")
        if len(counts[split]) != 1 or len(names) != next(iter(counts[split])):
            raise TrainerError(
                f"{data_dir}: the {prefix} files are incomplete or mixed ({len(names)} files, "
                f"'-of-' counts {sorted(counts[split])})"
            )
    return found


def count_records(path):
    import tensorflow as tf

    try:
        return int(tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))
    except tf.errors.OpError as exc:
        raise TrainerError(f"{path} is not a readable TFRecord file ({exc.message.splitlines()[0]})") from None


@report_errors(PROG)
def main(argv=None):
    settings = resolve(OPTIONS, argv, prog=f"python -m horovod_trainer.{PROG}", description=__doc__.splitlines()[0])
    data_dir = settings["data_dir"]
    if not data_dir:
        raise TrainerError("--data-dir (or TRAINER_DATA_DIR) is required")
    if not os.path.isdir(data_dir):
        raise TrainerError(f"--data-dir {data_dir} is not a directory")
    if settings["skip_existing"]:
        existing = manifest_mod.complete(data_dir, "imagenet")
        if existing is not None:
            print(f"{data_dir} already has a manifest of {existing.num_samples('train')} train images; skipping")
            return 0
    shards = find_shards(data_dir)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    names = [name for split in manifest_mod.SPLITS for name in shards[split]]
    print(f"counting the records of {len(names)} files in {data_dir} ({settings['threads']} at a time)", flush=True)
    counts, started = {}, time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(settings["threads"]) as pool:
        futures = {pool.submit(count_records, os.path.join(data_dir, name)): name for name in names}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            counts[futures[future]] = future.result()
            if done % 64 == 0 or done == len(names):
                print(f"  {done}/{len(names)} files, {time.monotonic() - started:.0f}s", flush=True)
    splits = {split: [(name, counts[name]) for name in shards[split]] for split in manifest_mod.SPLITS}
    table = manifest_mod.to_json(
        SOURCE, (), settings["num_classes"], splits, layout="imagenet", label_offset=settings["label_offset"]
    )
    atomic.write_text(os.path.join(data_dir, manifest_mod.MANIFEST_NAME), json.dumps(table, indent=2) + "\n")
    totals = ", ".join(f"{sum(n for _, n in splits[split])} {split}" for split in manifest_mod.SPLITS)
    print(f"wrote {os.path.join(data_dir, manifest_mod.MANIFEST_NAME)}: {totals} images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
