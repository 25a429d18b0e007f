"""The data directory's table of contents (`manifest.json`); no TensorFlow needed.

Layout of a data directory written by `prepare_data`:

    manifest.json                      written last: its presence means the shards are complete
    train-00000-of-00008.tfrecord ...  training shards, samples in a fixed shuffled order
    eval-00000-of-00008.tfrecord ...   evaluation shards

The manifest records how many samples each shard holds, so every rank can compute its share and the
number of steps per epoch without reading the data.
"""

import dataclasses
import json
import os

from .errors import TrainerError

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1
SPLITS = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class Shard:
    path: str
    samples: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    root: str
    source: str
    feature_shape: tuple[int, ...]
    num_classes: int
    splits: dict[str, list[Shard]]

    def shards(self, split) -> list[Shard]:
        return self.splits[split]

    def num_samples(self, split) -> int:
        return sum(shard.samples for shard in self.splits[split])

    @property
    def feature_size(self) -> int:
        size = 1
        for dim in self.feature_shape:
            size *= dim
        return size


def shard_name(split, index, count):
    return f"{split}-{index:05d}-of-{count:05d}.tfrecord"


def to_json(source, feature_shape, num_classes, splits):
    """splits: {split: [(file name, samples), ...]}"""
    return {
        "format": FORMAT_VERSION,
        "source": source,
        "feature_shape": list(feature_shape),
        "num_classes": num_classes,
        "splits": {
            split: [{"file": name, "samples": samples} for name, samples in shards] for split, shards in splits.items()
        },
    }


def load(data_dir) -> Manifest:
    """Read and check the manifest of data_dir; raise TrainerError with a fix if it is unusable."""
    hint = f"run `python -m horovod_trainer.prepare_data --out-dir {data_dir}` first"
    if not os.path.isdir(data_dir):
        raise TrainerError(f"data dir {data_dir} does not exist ({hint})")
    path = os.path.join(data_dir, MANIFEST_NAME)
    if not os.path.isfile(path):
        raise TrainerError(f"data dir {data_dir} has no {MANIFEST_NAME} ({hint})")
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
        if raw.get("format") != FORMAT_VERSION:
            raise TrainerError(f"{path} has format {raw.get('format')!r}, expected {FORMAT_VERSION} ({hint})")
        splits = {
            split: [
                Shard(os.path.join(data_dir, entry["file"]), int(entry["samples"])) for entry in raw["splits"][split]
            ]
            for split in SPLITS
        }
        manifest = Manifest(
            root=data_dir,
            source=str(raw["source"]),
            feature_shape=tuple(int(dim) for dim in raw["feature_shape"]),
            num_classes=int(raw["num_classes"]),
            splits=splits,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrainerError(f"{path} is unreadable ({type(exc).__name__}: {exc}); {hint}") from None
    for split in SPLITS:
        if manifest.num_samples(split) == 0:
            raise TrainerError(f"{path} lists no {split} samples ({hint})")
        for shard in manifest.shards(split):
            if not os.path.isfile(shard.path):
                raise TrainerError(f"shard {shard.path} listed in {path} is missing ({hint})")
    return manifest
