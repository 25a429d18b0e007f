"""The data directory's table of contents (`manifest.json`); no TensorFlow needed.

Two record layouts (`layout` in the manifest):

    features   the bundled digits: `image` (flat floats), `label`, `id`
               train-00000-of-00008.tfrecord ...  eval-00000-of-00008.tfrecord ...
    imagenet   the ImageNet TFRecord layout of TensorFlow's build_imagenet_data.py: `image/encoded`
               (JPEG) and `image/class/label` (1 to 1000; 0 was reserved for "background")
               train-00000-of-01024 ...  validation-00000-of-00128 ...

manifest.json is written last (by `prepare_data`, or by `index_data` for an existing ImageNet
directory): its presence means the shards are complete. It records how many samples each shard holds,
so every rank can compute its share and the number of steps per epoch without reading the data.
"""

import dataclasses
import json
import os

from .errors import TrainerError

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1 had only the features layout
SPLITS = ("train", "eval")
LAYOUTS = ("features", "imagenet")


@dataclasses.dataclass(frozen=True)
class Shard:
    path: str
    samples: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    root: str
    source: str
    feature_shape: tuple[int, ...]  # features layout; () for imagenet, whose images are cropped to a size
    num_classes: int
    splits: dict[str, list[Shard]]
    layout: str = "features"
    label_offset: int = 0  # subtracted from a stored label to give a class index in [0, num_classes)

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


# File names of each layout's splits: {layout: {split: prefix}}, and the file name suffix.
FILE_PREFIXES = {"features": {"train": "train", "eval": "eval"}, "imagenet": {"train": "train", "eval": "validation"}}
FILE_SUFFIXES = {"features": ".tfrecord", "imagenet": ""}


def shard_name(split, index, count, layout="features"):
    return f"{FILE_PREFIXES[layout][split]}-{index:05d}-of-{count:05d}{FILE_SUFFIXES[layout]}"


def to_json(source, feature_shape, num_classes, splits, layout="features", label_offset=0):
    """splits: {split: [(file name, samples), ...]}"""
    return {
        "format": FORMAT_VERSION,
        "layout": layout,
        "source": source,
        "feature_shape": list(feature_shape),
        "num_classes": num_classes,
        "label_offset": label_offset,
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
        if any(name.startswith("validation-") for name in os.listdir(data_dir)):
            hint = f"for ImageNet-layout files run `python -m horovod_trainer.index_data --data-dir {data_dir}` first"
        raise TrainerError(f"data dir {data_dir} has no {MANIFEST_NAME} ({hint})")
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
        if raw.get("format") not in READABLE_VERSIONS:
            raise TrainerError(f"{path} has format {raw.get('format')!r}, expected {FORMAT_VERSION} ({hint})")
        layout = raw.get("layout", "features")
        if layout not in LAYOUTS:
            raise TrainerError(f"{path} has layout {layout!r}, expected one of {', '.join(LAYOUTS)} ({hint})")
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
            layout=layout,
            label_offset=int(raw.get("label_offset", 0)),
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


def complete(data_dir, layout) -> Manifest | None:
    """The manifest of data_dir if it holds a complete data set of `layout`, else None."""
    try:
        existing = load(data_dir)
    except TrainerError:
        return None
    return existing if existing.layout == layout else None
