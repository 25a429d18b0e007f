"""Horovod process setup and the few collectives the trainer uses."""

import hashlib

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

from . import devices


def init():
    """hvd.init(), then one GPU per local rank (or a share of the cores); returns the device."""
    hvd.init()
    return devices.configure(hvd.local_rank(), hvd.local_size())


def rank():
    return hvd.rank()


def size():
    return hvd.size()


def local_size():
    return hvd.local_size()


def is_chief():
    return hvd.rank() == 0


def broadcast_object(value):
    return hvd_tf.broadcast_object(value, root_rank=0)


def allgather_object(value):
    return hvd_tf.allgather_object(value)


def sum_over_ranks(values):
    """Element-wise sum of a float vector over all ranks."""
    tensor = tf.constant(np.asarray(values, dtype=np.float64))
    return hvd_tf.allreduce(tensor, op=hvd_tf.Sum, name="trainer.sum_over_ranks").numpy()


def average_variables(variables):
    """Set each variable to its mean over all ranks (one grouped allreduce)."""
    if not variables:
        return
    averaged = hvd_tf.grouped_allreduce([v.value() for v in variables], op=hvd_tf.Average, name="trainer.average_vars")
    for variable, value in zip(variables, averaged, strict=True):
        variable.assign(value)


def loss_scale_variables(optimizer):
    """The dynamic loss scale and its counter of a Keras 2.15 LossScaleOptimizer (else none).

    `optimizer.variables` of a LossScaleOptimizer lists only the inner optimizer's variables
    (keras/src/mixed_precision/loss_scale_optimizer.py, LossScaleOptimizerV3), so the scale that a
    checkpoint restores on rank 0 must be broadcast on its own.
    """
    state = getattr(optimizer, "_loss_scale", None)
    if state is None or not hasattr(state, "counter"):
        return []
    return [state.current_loss_scale, state.counter]


def broadcast_loss_scale(optimizer):
    variables = loss_scale_variables(optimizer)
    if variables:
        hvd_tf.broadcast_variables(variables, root_rank=0)


def broadcast_training_state(model, optimizer):
    """Make every rank start from rank 0's weights, optimizer slots and loss scale (fresh or restored)."""
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    hvd_tf.broadcast_variables(optimizer.variables, root_rank=0)
    broadcast_loss_scale(optimizer)


def distributed_optimizer(optimizer, fp16_allreduce=False, backward_passes_per_step=1, gradient_predivide_factor=1.0):
    """Horovod's allreduce around `optimizer`; local gradients of several passes are averaged, not summed."""
    return hvd.DistributedOptimizer(
        optimizer,
        compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=True,
        gradient_predivide_factor=gradient_predivide_factor,
    )


def metric_average_callback():
    return hvd.callbacks.MetricAverageCallback()


def weights_digest(model):
    """A fingerprint of the model weights, to check that ranks agree."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()
