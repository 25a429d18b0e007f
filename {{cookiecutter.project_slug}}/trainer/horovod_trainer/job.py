"""One training job: set up Horovod and the model, resume, train, evaluate, report."""

import json
import sys
import time

import tensorflow as tf

from . import atomic, devices, distributed, input_pipeline, models, sharding
from .callbacks import (
    AverageBatchNormStatistics,
    CheckpointWriter,
    Clock,
    GlobalEvaluation,
    LearningRateSchedule,
    ThroughputMeter,
)
from .checkpoints import CheckpointStore, Position
from .errors import TargetNotReached, TrainerError
from .evaluation import Evaluator
from .schedule import Schedule


def say(message):
    """Progress and results are printed by rank 0 only."""
    if distributed.is_chief():
        print(message, flush=True)


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Job:
    def __init__(self, config):
        self.config = config
        self.device = distributed.init()
        self.started = time.monotonic()
        tf.keras.utils.set_random_seed(config.seed)
        if config.mixed_precision:
            # Layers compute in float16 and keep float32 weights; the logits stay float32 (models.py).
            tf.keras.mixed_precision.set_global_policy("mixed_float16")
        data = config.data
        self.model = models.build_model(
            config.model, models.input_shape(data, config.image_size), data.num_classes, config.width
        )
        self.optimizer = self.make_optimizer()
        models.compile_model(self.model, self.optimizer)  # --xla: auto-clustering, see train.py
        # Create the optimizer slots now, so that they can be restored and broadcast before step 1.
        self.optimizer.build(self.model.trainable_variables)
        self.decoding = input_pipeline.Decoding(
            image_size=config.image_size, parallel_calls=devices.cores_per_process(distributed.local_size())
        )
        self.state = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        self.store = CheckpointStore(config.checkpoint_dir, config.keep_checkpoints) if config.checkpoint_dir else None
        self.meter = ThroughputMeter(config.batch_size)
        self.resumed_from = None

    def make_optimizer(self):
        """The optimizer, wrapped for Horovod and, with mixed precision, for loss scaling.

        Loss scaling goes outside Horovod's wrapper: LossScaleOptimizer computes the gradients through
        the inner optimizer, whose compute_gradients does the allreduce, and only then checks them for
        inf/NaN, so every rank sees the same summed gradients and skips the same steps.
        """
        config = self.config
        if config.optimizer == "sgd":
            optimizer = tf.keras.optimizers.SGD(
                learning_rate=config.base_lr, momentum=config.momentum, weight_decay=config.weight_decay or None
            )
        else:
            optimizer = tf.keras.optimizers.Adam(learning_rate=config.base_lr, weight_decay=config.weight_decay or None)
        optimizer = distributed.distributed_optimizer(
            optimizer,
            fp16_allreduce=config.fp16_allreduce,
            backward_passes_per_step=config.backward_passes_per_step,
            gradient_predivide_factor=config.gradient_predivide_factor,
        )
        if config.weight_decay:
            optimizer.exclude_from_weight_decay(var_list=models.no_decay_variables(self.model))
        if config.mixed_precision:
            optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
        return optimizer

    # ----- data layout for the current world size (it changes in elastic mode)

    def plan(self, split):
        shard_sizes = [shard.samples for shard in self.config.data.shards(split)]
        # Evaluation runs batch norm in inference mode, so weight-0 filler is harmless there.
        last_batch = self.config.last_batch if split == "train" else "pad"
        try:
            return sharding.plan_rank(
                shard_sizes, distributed.size(), distributed.rank(), self.config.batch_size, last_batch
            )
        except ValueError as exc:
            raise TrainerError(f"{split} split: {exc}") from None

    def layout(self):
        """What a mid-epoch step number depends on: the same layout is needed to skip the same batches."""
        return {
            "world_size": distributed.size(),
            "batch_size": self.config.batch_size,
            "train_samples": self.config.data.num_samples("train"),
            "last_batch": self.config.last_batch,
        }

    def schedule(self):
        """The learning-rate schedule at the current world size (linear scaling on the global batch)."""
        config = self.config
        return Schedule(
            base_lr=config.base_lr,
            peak_lr=config.base_lr * distributed.size() * config.backward_passes_per_step,
            warmup_epochs=config.warmup_epochs,
            total_epochs=config.epochs,
            kind=config.lr_schedule,
            decay_epochs=config.lr_decay_epochs,
            decay_factor=config.lr_decay_factor,
        )

    # ----- checkpoints

    def restore_latest(self):
        """Load the newest checkpoint into this process; returns where to continue. No collectives."""
        if self.store is None:
            return Position(0)
        self.store.remove_leftovers()
        saved = self.store.latest()
        if saved is None:
            say(f"no checkpoint in {self.store.directory}; starting from scratch")
            return Position(0)
        if saved.meta.get("model") != self.config.model:
            raise TrainerError(
                f"{saved.path} holds a {saved.meta.get('model')!r} model, not {self.config.model!r}; "
                "use the same --model or another --checkpoint-dir"
            )
        try:
            self.state.read(saved.state_prefix).assert_existing_objects_matched()
        except (tf.errors.OpError, AssertionError, ValueError) as exc:
            raise TrainerError(f"cannot restore {saved.path}: {_first_line(exc)}") from None
        position = saved.position
        self.resumed_from = {"path": saved.path, "epoch": position.epoch, "step": position.step}
        if position.step and saved.meta.get("layout") != self.layout():
            say(f"{saved.path} was taken mid-epoch with another layout; epoch {position.epoch} restarts at step 0")
            position = Position(position.epoch)
        say(f"resuming from {saved.path}: epoch {position.epoch}, step {position.step}")
        return position

    def save(self, position, logs):
        meta = {
            "model": self.config.model,
            "layout": self.layout(),
            "global_step": int(self.optimizer.iterations.numpy()),
            "metrics": {key: float(value) for key, value in logs.items()},
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        path = self.store.save(position, meta, self.state.write)
        say(f"saved checkpoint {path}")

    def resume_everywhere(self):
        """Rank 0 restores; every rank learns the position and starts from rank 0's variables."""
        outcome = {"epoch": 0, "step": 0, "error": None}
        if distributed.is_chief():
            try:
                position = self.restore_latest()
                outcome.update(epoch=position.epoch, step=position.step)
            except TrainerError as exc:
                outcome["error"] = str(exc)
        outcome = distributed.broadcast_object(outcome)
        if outcome["error"]:
            raise TrainerError(outcome["error"])
        distributed.broadcast_training_state(self.model, self.optimizer)
        return Position(outcome["epoch"], outcome["step"])

    # ----- training

    def callbacks(self, clock, plan, extra):
        config = self.config
        callbacks = [
            clock,
            LearningRateSchedule(clock, self.schedule, lambda: plan.steps_per_epoch),
            # Average the per-rank training metrics before anything below logs them.
            distributed.metric_average_callback(),
            AverageBatchNormStatistics(distributed.average_variables),
            GlobalEvaluation(self.evaluator()),
        ]
        if distributed.is_chief() and self.store is not None:
            callbacks.append(CheckpointWriter(clock, self.save, config.checkpoint_every_steps))
        if distributed.is_chief() and config.log_dir:
            callbacks.append(tf.keras.callbacks.TensorBoard(config.log_dir, profile_batch=0))
        callbacks.append(self.meter)
        return callbacks + list(extra)

    def evaluator(self):
        batches = input_pipeline.eval_batches(self.config.data, self.plan("eval"), self.decoding)
        return Evaluator(self.model, batches, distributed.sum_over_ranks)

    def fit_from(self, position, extra_callbacks=lambda clock, plan: ()):
        """Train from `position` to the last epoch. A partial first epoch runs as its own fit() call."""
        config = self.config
        plan = self.plan("train")
        steps = plan.steps_per_epoch
        if position.step >= steps:
            position = Position(position.epoch + 1)
        clock = Clock(position)
        self.meter.global_batch_size = config.batch_size * distributed.size()  # changes in elastic mode
        callbacks = self.callbacks(clock, plan, extra_callbacks(clock, plan))
        verbose = (1 if sys.stdout.isatty() else 2) if distributed.is_chief() else 0

        def fit(first_epoch, last_epoch, skip_steps):
            batches = input_pipeline.train_batches(
                config.data,
                plan,
                config.seed,
                first_epoch,
                last_epoch,
                skip_steps,
                config.shuffle_buffer,
                self.decoding,
            )
            self.model.fit(
                batches,
                steps_per_epoch=steps - skip_steps,
                initial_epoch=first_epoch,
                epochs=last_epoch,
                callbacks=callbacks,
                verbose=verbose,
            )

        if position.step and position.epoch < config.epochs:
            say(f"Epoch {position.epoch + 1}/{config.epochs}: continuing at step {position.step} of {steps}")
            fit(position.epoch, position.epoch + 1, position.step)
            position = Position(position.epoch + 1)
        if position.epoch < config.epochs:
            fit(position.epoch, config.epochs, 0)

    def describe(self, start):
        """Rank 0's start-up line: world, device, data split, steps, learning rate, epochs."""
        config = self.config
        plan = self.plan("train")
        size = distributed.size()
        total = config.data.num_samples("train")
        shares = sorted({stop - begin for begin, stop in (sharding.rank_range(total, size, r) for r in range(size))})
        schedule = self.schedule()
        precision = "mixed_float16" if config.mixed_precision else "float32"
        remainder = (
            f"up to {plan.dropped_samples} per rank left out each epoch"
            if config.last_batch == "drop"
            else f"up to {plan.padded_samples} weight-0 filler per rank"
        )
        say(
            f"horovod_trainer: {size} process(es), rank 0 on {self.device}; model {config.model} "
            f"({precision}{', XLA' if config.xla else ''}); "
            f"{total} train samples ({'/'.join(map(str, shares))} per rank), "
            f"{plan.steps_per_epoch} steps/epoch of {config.batch_size} ({config.last_batch}: {remainder}); "
            f"lr {config.base_lr:g} -> {schedule.peak_lr:g} over {config.warmup_epochs:g} epoch(s), "
            f"then {config.lr_schedule}; epochs {start.epoch}..{config.epochs}"
        )

    # ----- results

    def finish(self, start):
        config = self.config
        result = self.evaluator()()
        digests = distributed.allgather_object(distributed.weights_digest(self.model))
        elapsed = time.monotonic() - self.started
        say(
            f"final eval accuracy: {result.accuracy:.4f} (loss {result.loss:.4f}, {result.samples} samples, "
            f"{distributed.size()} process(es), {elapsed:.1f}s after start-up)"
        )
        if distributed.is_chief() and config.stats_file:
            stats = {
                "world_size": distributed.size(),
                "model": config.model,
                "mixed_precision": config.mixed_precision,
                "xla": config.xla,
                "last_batch": config.last_batch,
                "learning_rate": float(tf.keras.backend.get_value(self.optimizer.learning_rate)),
                "batch_size": config.batch_size,
                "epochs": config.epochs,
                "start": {"epoch": start.epoch, "step": start.step},
                "resumed_from": self.resumed_from,
                "global_step": int(self.optimizer.iterations.numpy()),
                "eval_accuracy": result.accuracy,
                "eval_loss": result.loss,
                "eval_samples": result.samples,
                "train_samples_per_second": self.meter.samples_per_second,
                "weight_digests": digests,
                "device": self.device,
                "seconds": elapsed,
            }
            atomic.write_text(config.stats_file, json.dumps(stats, indent=2) + "\n")
        if config.target_accuracy and result.accuracy < config.target_accuracy:
            raise TargetNotReached(
                f"final eval accuracy {result.accuracy:.4f} is below --target-accuracy {config.target_accuracy:g}"
            )


def run_training(config):
    job = Job(config)
    if config.elastic:
        from .elastic import train_elastic

        start = train_elastic(job)
    else:
        start = job.resume_everywhere()
        job.describe(start)
        job.fit_from(start)
    job.finish(start)
    return 0
