"""Bad settings end the process with a non-zero code and exactly one clear line on stderr."""

import os
import shutil

import pytest
from conftest import run_module

from horovod_trainer import manifest


def assert_one_line_error(completed, prog, *fragments, code=2):
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode == code, completed.stderr
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert "Traceback" not in completed.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture()
def broken_data_dirs(data_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    gap = tmp_path / "gap"
    shutil.copytree(data_dir, gap)
    os.remove(gap / manifest.shard_name("eval", 0, 5))
    return {"empty": str(empty), "gap": str(gap)}


TRAIN_CASES = {
    "missing data dir": (
        ["--data-dir", "/nonexistent/data"],
        {},
        ["/nonexistent/data", "does not exist", "prepare_data"],
    ),
    "no data dir at all": ([], {}, ["--data-dir", "required"]),
    "batch size 0": (["--data-dir", "{data}", "--batch-size", "0"], {}, ["--batch-size", "at least 1"]),
    "batch size 0 from env": (["--data-dir", "{data}"], {"TRAINER_BATCH_SIZE": "0"}, ["TRAINER_BATCH_SIZE"]),
    "epochs not a number": (["--data-dir", "{data}", "--epochs", "ten"], {}, ["--epochs", "integer", "ten"]),
    "negative learning rate": (["--data-dir", "{data}", "--base-lr", "-0.1"], {}, ["--base-lr"]),
    "unknown model": (["--data-dir", "{data}", "--model", "resnet"], {}, ["--model", "mlp, cnn"]),
    "elastic env not boolean": (["--data-dir", "{data}"], {"TRAINER_ELASTIC": "maybe"}, ["TRAINER_ELASTIC"]),
    "unknown flag": (["--data-dir", "{data}", "--learning-rate", "1"], {}, ["--learning-rate"]),
    "checkpoint dir is a file": (
        ["--data-dir", "{data}", "--checkpoint-dir", "{data}/manifest.json"],
        {},
        ["--checkpoint-dir"],
    ),
    "data dir without manifest": (["--data-dir", "{empty}"], {}, ["manifest.json"]),
    "filler with batch norm": (
        ["--data-dir", "{data}", "--model", "resnet50", "--last-batch", "pad"],
        {},
        ["--last-batch pad", "resnet50", "batch normalisation", "drop"],
    ),
    "step schedule without epochs": (
        ["--data-dir", "{data}", "--lr-schedule", "step"],
        {},
        ["--lr-schedule step", "--lr-decay-epochs"],
    ),
    "decay epochs out of order": (
        ["--data-dir", "{data}", "--lr-decay-epochs", "60,30"],
        {},
        ["--lr-decay-epochs", "increasing epochs", "60,30"],
    ),
    "accumulation with mixed precision": (
        ["--data-dir", "{data}", "--backward-passes-per-step", "2", "--mixed-precision"],
        {},
        ["--backward-passes-per-step", "--mixed-precision"],
    ),
    "accumulation with elastic": (
        ["--data-dir", "{data}", "--backward-passes-per-step", "2", "--elastic"],
        {},
        ["--backward-passes-per-step", "--elastic"],
    ),
    "unknown optimizer": (["--data-dir", "{data}", "--optimizer", "lamb"], {}, ["--optimizer", "adam, sgd"]),
    "shard missing": (["--data-dir", "{gap}"], {}, ["eval-00000-of-00005.tfrecord", "missing"]),
}


@pytest.mark.parametrize("case", sorted(TRAIN_CASES))
def test_train_rejects_bad_settings_in_one_line(case, data_dir, broken_data_dirs):
    args, env, fragments = TRAIN_CASES[case]
    args = [arg.format(data=data_dir, **broken_data_dirs) for arg in args]
    assert_one_line_error(run_module("train", args, env=env), "train", *fragments)


def test_flag_beats_environment_for_a_bad_value(data_dir):
    completed = run_module("train", ["--data-dir", data_dir, "--batch-size", "-1"], env={"TRAINER_BATCH_SIZE": "8"})
    assert_one_line_error(completed, "train", "--batch-size")


@pytest.mark.parametrize(
    "args,fragments",
    [
        (["--shards", "0"], ["--shards"]),
        ([], ["--out-dir", "required"]),
        (["--out-dir", "{file}"], ["not a directory"]),
    ],
    ids=["zero shards", "no out dir", "out dir is a file"],
)
def test_prepare_data_rejects_bad_settings_in_one_line(args, fragments, data_dir, tmp_path):
    args = [arg.format(file=os.path.join(data_dir, "manifest.json")) for arg in args]
    if args[:1] == ["--shards"]:
        args += ["--out-dir", str(tmp_path / "out")]
    assert_one_line_error(run_module("prepare_data", args), "prepare_data", *fragments)


def test_checkpoint_of_another_model_is_refused_in_one_line(data_dir, tmp_path):
    checkpoints = str(tmp_path / "checkpoints")
    first = run_module("train", ["--data-dir", data_dir, "--epochs", "1", "--checkpoint-dir", checkpoints])
    assert first.returncode == 0, first.stderr
    completed = run_module(
        "train", ["--data-dir", data_dir, "--epochs", "2", "--model", "cnn", "--checkpoint-dir", checkpoints]
    )
    assert_one_line_error(completed, "train", "'mlp'", "--model")
