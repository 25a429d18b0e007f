"""prepare_data writes complete, readable shards of the bundled digits and is safe to re-run."""

import os

import tensorflow as tf
from conftest import SHARDS, run_module

from horovod_trainer import manifest
from horovod_trainer.records import decoder


def read_split(data, split):
    decode = decoder(data.feature_shape)
    ids, labels = [], []
    for shard in data.shards(split):
        for record in tf.data.TFRecordDataset(shard.path).map(decode):
            ids.append(int(record["id"]))
            labels.append(int(record["label"]))
            assert record["image"].shape == data.feature_shape
    return ids, labels


def test_writes_every_digit_once_in_shards(data):
    assert data.num_samples("train") + data.num_samples("eval") == 1797  # sklearn's digits
    for split in ("train", "eval"):
        assert len(data.shards(split)) == SHARDS
        sizes = [shard.samples for shard in data.shards(split)]
        assert max(sizes) - min(sizes) <= 1
        ids, labels = read_split(data, split)
        assert ids == list(range(data.num_samples(split)))  # the manifest's counts match the files
        assert set(labels) == set(range(data.num_classes))


def test_skip_existing_leaves_complete_data_alone(data_dir):
    manifest_path = os.path.join(data_dir, manifest.MANIFEST_NAME)
    before = os.stat(manifest_path).st_mtime_ns
    completed = run_module("prepare_data", ["--out-dir", data_dir, "--skip-existing"])
    assert completed.returncode == 0, completed.stderr
    assert "skipping" in completed.stdout
    assert os.stat(manifest_path).st_mtime_ns == before


def test_rewrite_removes_stale_shards_and_skip_existing_repairs_a_gap(tmp_path):
    out = str(tmp_path / "data")
    assert run_module("prepare_data", ["--out-dir", out, "--shards", "4"]).returncode == 0
    assert run_module("prepare_data", ["--out-dir", out, "--shards", "2"]).returncode == 0
    data = manifest.load(out)
    listed = {os.path.basename(shard.path) for split in manifest.SPLITS for shard in data.shards(split)}
    on_disk = {name for name in os.listdir(out) if name.endswith(".tfrecord")}
    assert on_disk == listed and len(listed) == 4
    assert not [name for name in os.listdir(out) if ".tmp-" in name]

    os.remove(os.path.join(out, manifest.shard_name("train", 1, 2)))
    completed = run_module("prepare_data", ["--out-dir", out, "--shards", "2", "--skip-existing"])
    assert completed.returncode == 0, completed.stderr
    assert "skipping" not in completed.stdout
    assert manifest.load(out).num_samples("train") == data.num_samples("train")
