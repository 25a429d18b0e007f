"""Command lines for local runs: the trainer's modules under this Python, alone or under horovodrun."""

import os
import shutil
import sys

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def horovodrun_path():
    """horovodrun next to this interpreter (a virtual environment's bin/), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    return beside if os.path.exists(beside) else shutil.which("horovodrun") or "horovodrun"


def module_command(module, args=()):
    return [sys.executable, "-m", f"horovod_trainer.{module}", *args]


def horovodrun_command(num_proc, module, args=(), launcher_args=(), local_hosts=True):
    """`horovodrun -np N -H localhost:N --gloo <python> -m horovod_trainer.<module> ...`

    local_hosts=False leaves out `-H`, for elastic runs whose hosts come from a discovery script.
    """
    hosts = ["-H", f"localhost:{num_proc}"] if local_hosts else []
    return [horovodrun_path(), "-np", str(num_proc), *hosts, "--gloo", *launcher_args, *module_command(module, args)]


def local_env(extra=None):
    """Environment for child processes: the package importable, the venv's bin/ first on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra or {})
    return env
