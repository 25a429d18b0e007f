"""ResNet-50 (narrow) on the synthetic ImageNet set with 2 real Horovod processes: it learns, the ranks
agree (batch-norm statistics included), and a run killed mid-schedule resumes on the same schedule."""

import subprocess

import pytest
from conftest import (
    IMAGENET_CLASSES,
    flags,
    horovodrun_command,
    kill_group,
    read_json,
    run_horovod,
    start_group,
    wait_for_first_checkpoint,
)

from horovod_trainer import sharding
from horovod_trainer.checkpoints import CheckpointStore
from horovod_trainer.schedule import Schedule

BATCH = 16
EPOCHS = 3
BASE_LR = 0.025
# An eighth of ResNet-50's channels on 32x32 crops: the same 53 convolutions and batch
# norms, small enough for two CPU processes.
RESNET = {
    "model": "resnet50",
    "width": 0.125,
    "image_size": 32,
    "optimizer": "sgd",
    "base_lr": BASE_LR,
    "batch_size": BATCH,
}


def steps(imagenet, world_size):
    return sharding.steps_per_epoch(imagenet.num_samples("train"), world_size, BATCH, "drop")


def final_rate(imagenet, world_size):
    """The rate the schedule gives the last batch of the run: progress = last epoch + (steps-1)/steps."""
    per_epoch = steps(imagenet, world_size)
    schedule = Schedule(BASE_LR, BASE_LR * world_size, 1.0, EPOCHS, "cosine")
    return schedule.rate(EPOCHS - 1 + (per_epoch - 1) / per_epoch)


def test_resnet_learns_with_two_ranks_and_the_ranks_agree(imagenet_dir, imagenet, tmp_path):
    stats_file = tmp_path / "stats.json"
    args = flags(data_dir=imagenet_dir, epochs=EPOCHS, lr_schedule="cosine", stats_file=stats_file, **RESNET)
    output = run_horovod(2, args)
    stats = read_json(stats_file)
    assert stats["eval_accuracy"] > 2 / IMAGENET_CLASSES, stats["eval_accuracy"]  # chance is 1/4
    assert stats["eval_samples"] == imagenet.num_samples("eval")  # evaluation still counts every image
    assert stats["last_batch"] == "drop"
    assert stats["global_step"] == EPOCHS * steps(imagenet, 2)
    # Batch-norm moving statistics are averaged over the ranks at each epoch end, so the ranks end
    # with one model (the digests cover every weight, moving statistics included).
    assert len(set(stats["weight_digests"])) == 1, stats["weight_digests"]
    assert stats["learning_rate"] == pytest.approx(final_rate(imagenet, 2), rel=1e-5)
    assert "model resnet50 (float32)" in output and "drop:" in output


def test_mixed_precision_resnet_resumes_mid_schedule(imagenet_dir, imagenet, tmp_path):
    checkpoint_dir = str(tmp_path / "checkpoints")
    args = flags(
        data_dir=imagenet_dir,
        epochs=EPOCHS,
        lr_schedule="cosine",
        checkpoint_dir=checkpoint_dir,
        checkpoint_every_steps=4,
        mixed_precision=True,
        **RESNET,
    )
    process = start_group(horovodrun_command(2, args), output=subprocess.DEVNULL)
    try:
        wait_for_first_checkpoint(process, checkpoint_dir)
    finally:
        kill_group(process)
    saved = CheckpointStore(checkpoint_dir).latest()
    assert saved.position.epoch < EPOCHS

    stats_file = tmp_path / "stats.json"
    output = run_horovod(2, args + flags(stats_file=stats_file))
    stats = read_json(stats_file)
    assert stats["start"] == {"epoch": saved.position.epoch, "step": saved.position.step}
    assert stats["mixed_precision"] is True
    # Rank 0's restored loss scale is broadcast with the weights, so the ranks stay one model.
    assert len(set(stats["weight_digests"])) == 1
    # The restored step counter plus the steps run: nothing repeated or skipped.
    assert stats["global_step"] == EPOCHS * steps(imagenet, 2)
    # The schedule went on from the checkpoint's position to the same end point.
    assert stats["learning_rate"] == pytest.approx(final_rate(imagenet, 2), rel=1e-5)
    assert stats["eval_accuracy"] > 1 / IMAGENET_CLASSES
    assert f"resuming from {saved.path}" in output


def test_xla_fp16_allreduce_and_predivision_train_together(data_dir, tmp_path):
    stats_file = tmp_path / "stats.json"
    args = flags(
        data_dir=data_dir,
        epochs=4,
        batch_size=32,
        xla=True,
        mixed_precision=True,
        fp16_allreduce=True,
        gradient_predivide_factor=2.0,
        stats_file=stats_file,
    )
    output = run_horovod(2, args)
    stats = read_json(stats_file)
    assert stats["xla"] is True and stats["mixed_precision"] is True
    assert len(set(stats["weight_digests"])) == 1
    assert stats["eval_accuracy"] > 0.8
    assert "(mixed_float16, XLA)" in output
    assert "Compiled cluster using XLA" in output  # TensorFlow's own line: XLA really compiled
