"""A directory of training checkpoints, each published atomically; no TensorFlow needed.

    <checkpoint-dir>/
      ckpt-e00003-s0000000/        the state after epoch 3 step 0, i.e. three whole epochs done
        meta.json                  position, world size, model name, metrics
        state.index, state.data-*  tf.train.Checkpoint of model + optimizer (written by the caller)
      ckpt-e00004-s0000020.tmp-81  a write that never finished: ignored, removed at the next start

A checkpoint is assembled under a temporary name and renamed into place when complete, so any directory
with a final name is whole. The newest `keep` checkpoints are kept.
"""

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable

from . import atomic

META_NAME = "meta.json"
STATE_PREFIX = "state"
_NAME = re.compile(r"^ckpt-e(\d{5,})-s(\d{7,})$")


@dataclasses.dataclass(frozen=True, order=True)
class Position:
    """Where training continues: `step` batches of epoch `epoch` are done."""

    epoch: int
    step: int = 0


@dataclasses.dataclass(frozen=True)
class Saved:
    path: str
    position: Position
    meta: dict

    @property
    def state_prefix(self):
        return os.path.join(self.path, STATE_PREFIX)


def checkpoint_name(position: Position):
    return f"ckpt-e{position.epoch:05d}-s{position.step:07d}"


class CheckpointStore:
    def __init__(self, directory, keep=3):
        self.directory = directory
        self.keep = keep

    def _complete(self):
        """Saved checkpoints with a final name and a readable meta.json, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        found = []
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if not match:
                continue
            path = os.path.join(self.directory, name)
            try:
                with open(os.path.join(path, META_NAME), encoding="utf-8") as handle:
                    meta = json.load(handle)
            except (OSError, ValueError):
                continue
            found.append(Saved(path, Position(int(match.group(1)), int(match.group(2))), meta))
        return sorted(found, key=lambda saved: saved.position)

    def latest(self) -> Saved | None:
        complete = self._complete()
        return complete[-1] if complete else None

    def remove_leftovers(self):
        """Delete temporary directories of writes that were interrupted."""
        if not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            if name.startswith("ckpt-") and atomic.is_temp_name(name):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def save(self, position: Position, meta: dict, write_state: Callable[[str], None]) -> str:
        """write_state(prefix) writes the model and optimizer state; returns the checkpoint path."""
        os.makedirs(self.directory, exist_ok=True)
        final = os.path.join(self.directory, checkpoint_name(position))
        temporary = atomic.temp_name(final)
        shutil.rmtree(temporary, ignore_errors=True)
        os.makedirs(temporary)
        write_state(os.path.join(temporary, STATE_PREFIX))
        record = dict(meta, epoch=position.epoch, step=position.step)
        with open(os.path.join(temporary, META_NAME), "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=2, sort_keys=True)
        if os.path.exists(final):  # the same position saved again (e.g. after an elastic reset)
            shutil.rmtree(final)
        atomic.publish(temporary, final)
        self._prune()
        return final

    def _prune(self):
        for saved in self._complete()[: -self.keep]:
            shutil.rmtree(saved.path, ignore_errors=True)
