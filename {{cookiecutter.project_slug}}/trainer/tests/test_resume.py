"""A job killed after its first checkpoint continues from it when started again.

Checkpoints are published by renaming a complete temporary directory; a newer, truncated one left
under its temporary name (as a crash mid-save would) must be ignored and cleaned up.
"""

import os
import shutil
import subprocess

import pytest
from conftest import (
    flags,
    horovodrun_command,
    kill_group,
    read_json,
    run_horovod,
    start_group,
    steps_per_epoch,
    wait_for_first_checkpoint,
)

from horovod_trainer.checkpoints import CheckpointStore, Position

BATCH = 32


def start_and_kill_after_first_checkpoint(args, checkpoint_dir):
    """Run 2 ranks under horovodrun; SIGKILL the whole process group once a checkpoint is complete.

    Returns (the first checkpoint, the newest complete one after the kill): training goes on between
    the first one appearing and the kill, so a later one may have been published meanwhile."""
    process = start_group(horovodrun_command(2, args), output=subprocess.DEVNULL)
    try:
        first = wait_for_first_checkpoint(process, checkpoint_dir)
    finally:
        kill_group(process)
    return first, CheckpointStore(checkpoint_dir).latest()


def plant_half_written_checkpoint(saved, checkpoint_dir):
    """What a crash in the middle of a save leaves: a newer checkpoint under its temporary name."""
    leftover = os.path.join(checkpoint_dir, "ckpt-e00099-s0000000.tmp-4242")
    shutil.copytree(saved.path, leftover)
    for name in os.listdir(leftover):
        if name.startswith("state.data"):
            with open(os.path.join(leftover, name), "r+b") as handle:
                handle.truncate(10)
    return leftover


@pytest.mark.parametrize("every_steps", [0, 5], ids=["epoch-checkpoints", "step-checkpoints"])
def test_killed_run_resumes_from_its_latest_checkpoint(every_steps, data_dir, data, tmp_path):
    checkpoint_dir = str(tmp_path / "checkpoints")
    common = flags(
        data_dir=data_dir, batch_size=BATCH, checkpoint_dir=checkpoint_dir, checkpoint_every_steps=every_steps
    )
    first, saved = start_and_kill_after_first_checkpoint(common + flags(epochs=100), checkpoint_dir)
    assert first.position <= saved.position < Position(100)
    if every_steps:
        assert first.position.step > 0 and first.position.step % every_steps == 0
    else:
        assert first.position.epoch >= 1 and first.position.step == 0

    leftover = plant_half_written_checkpoint(saved, checkpoint_dir)

    final_epoch = saved.position.epoch + 1
    stats_file = str(tmp_path / "stats.json")
    output = run_horovod(2, common + flags(epochs=final_epoch, stats_file=stats_file))

    stats = read_json(stats_file)
    assert stats["resumed_from"]["path"] == saved.path
    assert stats["start"] == {"epoch": saved.position.epoch, "step": saved.position.step}
    # The restored step counter plus the steps run: nothing was repeated or skipped.
    assert stats["global_step"] == final_epoch * steps_per_epoch(data, 2, BATCH)
    assert f"resuming from {saved.path}: epoch {saved.position.epoch}, step {saved.position.step}" in output
    assert CheckpointStore(checkpoint_dir).latest().position == Position(final_epoch)
    assert not os.path.exists(leftover)  # removed at start, never restored
