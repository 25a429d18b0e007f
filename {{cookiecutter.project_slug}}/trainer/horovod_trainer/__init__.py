"""Distributed Horovod + TensorFlow (Keras 2) trainer.

Entry points:
  python -m horovod_trainer.prepare_data   write sharded TFRecords from bundled data
  python -m horovod_trainer.train          train (under horovodrun / mpirun, or alone)
  python -m horovod_trainer.bench          samples/s: plain Keras vs Horovod -np 1 vs -np 2
  python -m horovod_trainer.fabric_check   pass or fail nccl-tests' all_reduce output against a bandwidth floor
"""
