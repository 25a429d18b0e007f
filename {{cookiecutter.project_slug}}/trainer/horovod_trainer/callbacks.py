"""Keras callbacks of the trainer. None of them imports Horovod: what they need is passed in."""

import statistics
import time

import tensorflow as tf

from .checkpoints import Position


class Clock(tf.keras.callbacks.Callback):
    """Tracks the training position (epoch, steps done in it) across fit() calls.

    Keras numbers batches from 0 in every fit() call, so after a mid-epoch resume its batch index is
    not the step within the epoch. Put this callback first: others read `position` in the same hook.
    """

    def __init__(self, position: Position):
        super().__init__()
        self.position = position

    def on_train_batch_end(self, batch, logs=None):
        self.position = Position(self.position.epoch, self.position.step + 1)

    def on_epoch_end(self, epoch, logs=None):
        self.position = Position(epoch + 1, 0)


class LearningRateSchedule(tf.keras.callbacks.Callback):
    """Sets the learning rate before every batch from a schedule.Schedule and the clock's position.

    The position (epoch, step) is restored with a checkpoint, so a resumed run continues the schedule
    where it stopped. `schedule_fn` and `steps_fn` are re-read at each fit() start, which an elastic
    reset triggers (the world size, and with it the peak rate and the steps per epoch, may change).
    """

    def __init__(self, clock: Clock, schedule_fn, steps_fn):
        super().__init__()
        self.clock = clock
        self.schedule_fn = schedule_fn
        self.steps_fn = steps_fn
        self.schedule = None
        self.steps = 1
        self.current = None

    def on_train_begin(self, logs=None):
        self.schedule = self.schedule_fn()
        self.steps = self.steps_fn()
        self.current = None

    def on_train_batch_begin(self, batch, logs=None):
        position = self.clock.position
        rate = self.schedule.rate(position.epoch + position.step / self.steps)
        if rate != self.current:
            tf.keras.backend.set_value(self.model.optimizer.learning_rate, rate)
            self.current = rate

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self.current is not None:
            logs["lr"] = self.current


class AverageBatchNormStatistics(tf.keras.callbacks.Callback):
    """At every epoch end, replace each rank's batch-norm moving mean and variance by their average
    over the ranks.

    Horovod averages gradients, not these statistics: each rank updates them from its own batches, so
    after an epoch the ranks hold slightly different models. Averaging them (as timm's `distribute_bn`
    does) makes evaluation and checkpoints use one model, estimated from every rank's batches. Put it
    before the evaluation and the checkpoint writer. `average` is a collective: every rank runs it.
    """

    def __init__(self, average):
        super().__init__()
        self.average = average

    def on_epoch_end(self, epoch, logs=None):
        self.average(self.model.non_trainable_variables)


class GlobalEvaluation(tf.keras.callbacks.Callback):
    """Adds `val_loss` and `val_accuracy` over the whole eval split (all ranks) to the epoch logs."""

    def __init__(self, evaluator):
        super().__init__()
        self.evaluator = evaluator

    def on_epoch_end(self, epoch, logs=None):
        result = self.evaluator()
        if logs is not None:
            logs["val_loss"] = result.loss
            logs["val_accuracy"] = result.accuracy


class CheckpointWriter(tf.keras.callbacks.Callback):
    """Saves at the end of every epoch and, with every_steps > 0, every that many steps within it."""

    def __init__(self, clock: Clock, save, every_steps=0):
        super().__init__()
        self.clock = clock
        self.save = save  # save(position, logs)
        self.every_steps = every_steps

    def on_train_batch_end(self, batch, logs=None):
        last_of_epoch = batch + 1 >= self.params["steps"]  # on_epoch_end saves that one
        if self.every_steps and self.clock.position.step % self.every_steps == 0 and not last_of_epoch:
            self.save(self.clock.position, {})

    def on_epoch_end(self, epoch, logs=None):
        self.save(self.clock.position, dict(logs or {}))


class ThroughputMeter(tf.keras.callbacks.Callback):
    """Training samples per second, all ranks together: the median over epochs, the first left out.

    The first epoch traces the graph and fills the pipeline; the median keeps a short disturbance on a
    shared machine from moving the figure. Only the time from an epoch's start to its last batch
    counts: evaluation and checkpoints do not.
    """

    def __init__(self, global_batch_size):
        super().__init__()
        self.global_batch_size = global_batch_size
        self.epoch_rates = []
        self._epochs_seen = 0
        self._epoch_started = None
        self._epoch_steps = 0
        self._last_batch_end = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = time.perf_counter()
        self._epoch_steps = 0

    def on_train_batch_end(self, batch, logs=None):
        self._epoch_steps += 1
        self._last_batch_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self._epochs_seen += 1
        if self._epochs_seen > 1 and self._epoch_steps:
            seconds = self._last_batch_end - self._epoch_started
            self.epoch_rates.append(self._epoch_steps * self.global_batch_size / seconds)

    @property
    def samples_per_second(self):
        return statistics.median(self.epoch_rates) if self.epoch_rates else None
