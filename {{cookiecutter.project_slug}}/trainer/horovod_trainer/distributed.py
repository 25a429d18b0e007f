"""Horovod process setup and the few collectives the trainer uses."""

import hashlib
import os

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf


def init():
    """hvd.init(), then give this process one GPU (by local rank) or a fair share of the CPU cores.

    Returns a short description of the device for the startup log.
    """
    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        # Grow memory on demand instead of TensorFlow reserving (almost) all of it up front.
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        index = hvd.local_rank() % len(gpus)
        tf.config.set_visible_devices(gpus[index], "GPU")
        shared = " (shared: more local ranks than GPUs)" if hvd.local_size() > len(gpus) else ""
        return f"GPU {index}{shared}"
    # Without this every process would start one thread per core and the processes on a host would
    # fight over them.
    cores = len(os.sched_getaffinity(0))
    threads = max(1, cores // hvd.local_size())
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    return f"CPU ({threads} of {cores} cores)"


def rank():
    return hvd.rank()


def size():
    return hvd.size()


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


def broadcast_training_state(model, optimizer):
    """Make every rank start from rank 0's weights and optimizer slots (fresh or restored)."""
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    hvd_tf.broadcast_variables(optimizer.variables, root_rank=0)


def distributed_optimizer(optimizer):
    return hvd.DistributedOptimizer(optimizer)


def metric_average_callback():
    return hvd.callbacks.MetricAverageCallback()


def weights_digest(model):
    """A fingerprint of the model weights, to check that ranks agree."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()
