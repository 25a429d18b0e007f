"""The ImageNet TFRecord layout: prepare_data writes it with real JPEGs, index_data indexes an existing
directory, and the input pipeline decodes and crops it."""

import json
import os
import shutil

import numpy as np
import tensorflow as tf
from conftest import IMAGENET_CLASSES, IMAGENET_SHARDS, flags, run_module
from test_cli_errors import assert_one_line_error

from horovod_trainer import input_pipeline, manifest, sharding
from horovod_trainer.synthetic_images import MAX_SIDE, MIN_SIDE

JPEG_MAGIC = b"\xff\xd8\xff"


def parse(record):
    example = tf.train.Example.FromString(record)
    return example.features.feature


def test_prepare_data_writes_the_imagenet_layout_with_real_jpegs(imagenet_dir, imagenet):
    expected = {f"train-{i:05d}-of-{IMAGENET_SHARDS:05d}" for i in range(IMAGENET_SHARDS)}
    expected |= {f"validation-{i:05d}-of-{IMAGENET_SHARDS:05d}" for i in range(IMAGENET_SHARDS)}
    assert set(os.listdir(imagenet_dir)) == expected | {manifest.MANIFEST_NAME}
    assert (imagenet.layout, imagenet.num_classes, imagenet.label_offset) == ("imagenet", IMAGENET_CLASSES, 1)
    assert imagenet.num_samples("train") + imagenet.num_samples("eval") == 640
    labels = set()
    for split in manifest.SPLITS:
        for shard in imagenet.shards(split):
            records = list(tf.data.TFRecordDataset(shard.path).as_numpy_iterator())
            assert len(records) == shard.samples
            for record in records:
                feature = parse(record)
                jpeg = feature["image/encoded"].bytes_list.value[0]
                assert jpeg.startswith(JPEG_MAGIC)
                image = tf.io.decode_jpeg(jpeg).numpy()
                assert image.shape[2] == 3 and MIN_SIDE <= min(image.shape[:2]) <= max(image.shape[:2]) <= MAX_SIDE
                assert feature["image/height"].int64_list.value[0] == image.shape[0]
                labels.add(feature["image/class/label"].int64_list.value[0])
    assert labels == set(range(1, IMAGENET_CLASSES + 1))  # stored 1-based, as build_imagenet_data.py does


def test_index_data_rebuilds_the_manifest_of_an_existing_directory(imagenet_dir, tmp_path):
    copy = tmp_path / "imagenet"
    shutil.copytree(imagenet_dir, copy)
    os.remove(copy / manifest.MANIFEST_NAME)
    completed = run_module("index_data", flags(data_dir=copy, num_classes=IMAGENET_CLASSES))
    assert completed.returncode == 0, completed.stderr
    written = json.loads((copy / manifest.MANIFEST_NAME).read_text())
    with open(os.path.join(imagenet_dir, manifest.MANIFEST_NAME), encoding="utf-8") as handle:
        original = json.load(handle)
    for key in ("layout", "num_classes", "label_offset", "splits"):
        assert original[key] == written[key], key
    before = (copy / manifest.MANIFEST_NAME).stat().st_mtime_ns
    again = run_module("index_data", flags(data_dir=copy, skip_existing=True))
    assert again.returncode == 0 and "skipping" in again.stdout
    assert (copy / manifest.MANIFEST_NAME).stat().st_mtime_ns == before


def test_skip_existing_replaces_data_of_the_other_layout(tmp_path):
    out = tmp_path / "data"
    assert run_module("prepare_data", flags(out_dir=out, shards=2)).returncode == 0
    completed = run_module(
        "prepare_data", flags(out_dir=out, format="imagenet", images=40, shards=2, skip_existing=True)
    )
    assert completed.returncode == 0, completed.stderr
    assert "skipping" not in completed.stdout
    assert manifest.load(str(out)).layout == "imagenet"
    assert sorted(os.listdir(out)) == sorted(
        [manifest.MANIFEST_NAME, *(manifest.shard_name(s, i, 2, "imagenet") for s in manifest.SPLITS for i in range(2))]
    )


def test_train_on_an_unindexed_imagenet_directory_points_at_index_data(imagenet_dir, tmp_path):
    copy = tmp_path / "imagenet"
    shutil.copytree(imagenet_dir, copy)
    os.remove(copy / manifest.MANIFEST_NAME)
    completed = run_module("train", flags(data_dir=copy, model="resnet50"))
    assert_one_line_error(completed, "train", "has no manifest.json", "horovod_trainer.index_data --data-dir")


def test_index_data_refuses_an_incomplete_split_and_writes_nothing(imagenet_dir, tmp_path):
    copy = tmp_path / "imagenet"
    shutil.copytree(imagenet_dir, copy)
    os.remove(copy / manifest.MANIFEST_NAME)
    os.remove(copy / f"train-00001-of-{IMAGENET_SHARDS:05d}")
    completed = run_module("index_data", flags(data_dir=copy))
    assert_one_line_error(completed, "index_data", "train files are incomplete", "2 files")
    assert not (copy / manifest.MANIFEST_NAME).exists()


def decoded(imagenet, seed, training=True, size=32):
    plan = sharding.plan_rank([s.samples for s in imagenet.shards("train")], 1, 0, 8, "drop")
    examples = input_pipeline.rank_examples(
        imagenet,
        "train",
        plan,
        shuffle_seed=seed if training else None,
        decoding=input_pipeline.Decoding(image_size=size, parallel_calls=2),
    )
    return list(examples.take(16).as_numpy_iterator())


def test_training_crops_are_random_per_epoch_and_repeatable(imagenet):
    first = decoded(imagenet, seed=11)
    again = decoded(imagenet, seed=11)
    other_epoch = decoded(imagenet, seed=12)
    assert all(e["image"].shape == (32, 32, 3) and e["image"].dtype == np.float32 for e in first)
    assert all(0 <= e["label"] < IMAGENET_CLASSES and e["weight"] == 1.0 for e in first)
    for a, b in zip(first, again, strict=True):  # a resumed epoch sees the same crops
        np.testing.assert_array_equal(a["image"], b["image"])
    assert any(not np.array_equal(a["image"], b["image"]) for a, b in zip(first, other_epoch, strict=True))


def test_evaluation_crops_are_centred_and_fixed(imagenet):
    first = decoded(imagenet, seed=None, training=False, size=48)
    again = decoded(imagenet, seed=None, training=False, size=48)
    assert all(e["image"].shape == (48, 48, 3) for e in first)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
