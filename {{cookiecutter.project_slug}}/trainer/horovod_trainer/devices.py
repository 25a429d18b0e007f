"""Device placement shared by the Horovod trainer and the plain-Keras baseline (no Horovod here)."""

import os

import tensorflow as tf


def configure(local_rank=0, local_size=1):
    """One GPU per local rank with memory growth, or a fair share of the CPU cores per process.

    Call before TensorFlow runs anything. Returns a short description for the logs.
    """
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        # Grow memory on demand instead of reserving (almost) all of it up front.
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        index = local_rank % len(gpus)
        tf.config.set_visible_devices(gpus[index], "GPU")
        shared = " (shared: more local ranks than GPUs)" if local_size > len(gpus) else ""
        return f"GPU {index}{shared}"
    # Otherwise every process starts one thread per core and the processes on a host fight over them.
    threads = cores_per_process(local_size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    return f"CPU ({threads} of {len(os.sched_getaffinity(0))} cores)"


def cores_per_process(local_size=1):
    """This host's cores (as the container's CPU affinity gives them) divided among its processes:
    the input pipeline's decode threads per GPU, and the CPU compute threads without one."""
    return max(1, len(os.sched_getaffinity(0)) // local_size)
