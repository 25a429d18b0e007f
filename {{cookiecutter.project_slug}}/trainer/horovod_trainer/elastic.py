"""Elastic training: workers may join or leave; training goes on from the last commit.

Launch (Gloo; on the MPI operator the launcher gets /etc/mpi/discover_hosts.sh, which prints hosts
without slots, hence --slots):

    horovodrun -np 2 --min-np 1 --max-np 4 \
        --host-discovery-script /etc/mpi/discover_hosts.sh --slots 1 \
        python -m horovod_trainer.train --elastic ...

State (weights, optimizer slots, epoch, step) is committed in memory at every checkpoint interval and
at epoch ends. After a reset the data is re-sharded for the new world size; if the size is unchanged
the interrupted epoch continues at the committed step, otherwise it restarts at step 0 (the weights
keep every committed update either way). Rank 0 still writes checkpoints to disk, so a restart of the
whole job resumes as in the non-elastic mode.
"""

import horovod.tensorflow.keras as hvd
import tensorflow as tf

from . import distributed
from .checkpoints import Position


class StateTracker(tf.keras.callbacks.Callback):
    """Copies the clock's position into the elastic state before CommitStateCallback commits it."""

    def __init__(self, state, clock):
        super().__init__()
        self.state = state
        self.clock = clock

    def _copy(self):
        self.state.epoch = self.clock.position.epoch
        self.state.step = self.clock.position.step

    def on_train_batch_end(self, batch, logs=None):
        self._copy()

    def on_epoch_end(self, epoch, logs=None):
        self._copy()


def train_elastic(job):
    """Run job.fit_from under hvd.elastic.run; returns the position training started from."""
    # No collectives before hvd.elastic.run: a worker that joins later runs this code too, while the
    # others wait in the state sync. Rank 0 restores from disk alone; sync() broadcasts its state.
    start = job.restore_latest() if distributed.is_chief() else Position(0)
    state = hvd.elastic.KerasState(
        job.model, job.optimizer, epoch=start.epoch, step=start.step, world_size=distributed.size()
    )

    def extra_callbacks(clock, plan):
        every = job.config.checkpoint_every_steps or plan.steps_per_epoch
        return [StateTracker(state, clock), hvd.elastic.CommitStateCallback(state, batches_per_commit=every)]

    @hvd.elastic.run
    def loop(state):
        # KerasState syncs weights and optimizer slots, not a LossScaleOptimizer's scale.
        distributed.broadcast_loss_scale(job.optimizer)
        same_layout = state.world_size == distributed.size()
        position = Position(state.epoch, state.step if same_layout else 0)
        state.world_size = distributed.size()
        job.describe(position)
        job.fit_from(position, extra_callbacks)
        return Position(state.epoch, state.step)

    loop(state)
    return Position(start.epoch, start.step)
