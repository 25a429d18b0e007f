"""MPI launch command lines: how a container starts mpirun (or horovodrun), read back into parts,
and built from named settings.

`mpirun_command` is the one place the repository's launcher command is written from (the
environment and job generators call it); `parse_launch` reads any launcher back, so the
launcher-command-malformed rule checks the same grammar the generators write: launcher options,
each with its operands, then the program and its module, then the program's own arguments.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from .fields import mapping
from .kinds import MPIJOB
from .pods import Container, PodTemplate, pod_templates

LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "horovodrun")
PROCESS_COUNT_FLAGS = ("-np", "--np", "-n", "--n", "-c", "--num-proc")
SHELLS = ("sh", "bash", "dash", "ash", "zsh")
PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")

# Open MPI 4.1 options that take operands (`mpirun --help all`), single- and double-dash forms, and
# horovodrun's. Options not listed are taken as switches without an operand.
_ONE_OPERAND = {
    "np",
    "n",
    "c",
    "x",
    "H",
    "host",
    "hostfile",
    "machinefile",
    "default-hostfile",
    "bind-to",
    "map-by",
    "rank-by",
    "npernode",
    "N",
    "npersocket",
    "output-filename",
    "wdir",
    "wd",
    "path",
    "prefix",
    "am",
    "tune",
    "report-uri",
    "timeout",
    "cpus-per-proc",
    "cpus-per-rank",
    "stdin",
    "num-proc",
    "hosts",
    "p",
    "ssh-port",
    "network-interface",
    "start-timeout",
    "log-level",
    "mpi-args",
    "min-np",
    "max-np",
    "slots-per-host",
    "rf",
    "rankfile",
    "cpu-set",
    "cpu-list",
    "launch-agent",
    "app",
    "preload-files",
    "report-pid",
    "ompi-server",
    "xterm",
    "personality",
    "config-file",
    "fusion-threshold-mb",
    "cycle-time-ms",
    "cache-capacity",
    "autotune-log-file",
    "timeline-filename",
    "host-discovery-script",
    "reset-limit",
    "binding-args",
    "gloo-timeout-seconds",
}
_TWO_OPERANDS = {"mca", "gmca", "prtemca", "pmixmca", "blacklist-cooldown-range"}
# Python's own options that take an operand.
_PYTHON_OPERAND = {"-W", "-X", "-Q"}
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(=.*)?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_COUNT = re.compile(r"[0-9]{1,18}")


def is_count(word: str) -> bool:
    """Whether `word` is a whole number in ASCII digits, as mpirun and int() read one: str.isdigit() also takes
    '²', which int() refuses, and int() refuses more than 4,300 digits."""
    return bool(_COUNT.fullmatch(word))


# What the generators start every MPI rank with: one rank per slot, no CPU binding (Horovod and
# tf.data pick their own threads), as root (the MPI operator's images run sshd as root).
_MPIRUN_SWITCHES = ("--allow-run-as-root", "--bind-to", "none", "--map-by", "slot")


# What every rank of a job on EFA nodes needs (aws/aws-ofi-nccl v1.21.1): NCCL_NET names the plugin
# (its ncclNet name "Libfabric", src/nccl_ofi_interface_nvidia.cpp), so NCCL stops with an error
# instead of quietly falling back to TCP sockets when EFA is unusable; FI_PROVIDER keeps libfabric
# on the efa provider, as AWS's EKS nccl-tests job does (aws-samples/awsome-distributed-training,
# micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml). doc/efa-env-var.md advises against the
# rest of the old set (FI_EFA_USE_DEVICE_RDMA, FI_EFA_FORK_SAFE, RDMAV_FORK_SAFE), so none is set.
EFA_ENVIRONMENT = {"FI_PROVIDER": "efa", "NCCL_NET": "Libfabric"}


def mpirun_command(processes: int, exports: list[str]) -> list[str]:
    """mpirun with `processes` ranks, exporting each of `exports` (NAME or NAME=value) to every rank.

    This is a container's `command`; its `args` are the program, its module and the program's flags."""
    command = ["mpirun", "-np", str(processes), *_MPIRUN_SWITCHES]
    for export in exports:
        command += ["-x", export]
    return command


def basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def launch_tokens(container: Container) -> tuple[list[str], callable]:
    """The launcher's words, and the field path of each: a `sh -c "..."` script is split."""
    argv = container.argv
    if argv and basename(argv[0]) in SHELLS:
        for index, word in enumerate(argv[:-1]):
            if word.startswith("-") and "c" in word.lstrip("-") and not word.startswith("--"):
                try:
                    tokens = shlex.split(argv[index + 1], comments=True)
                except ValueError:
                    return [], lambda i: container.path
                return tokens, lambda i, at=index + 1: container.argv_path(at)
    return argv, container.argv_path


def runs_mpi(container: Container) -> bool:
    tokens, _ = launch_tokens(container)
    return any(basename(t) in LAUNCHERS for t in tokens)


def _operands(option: str) -> int:
    name = option.lstrip("-").split("=", 1)[0]
    if "=" in option:
        return 0
    return 2 if name in _TWO_OPERANDS else 1 if name in _ONE_OPERAND else 0


@dataclass
class Launch:
    """A launcher command line read back: where each part starts, and what is wrong with it."""

    launcher: int  # index of mpirun (or horovodrun)
    options: list[tuple[int, list[int]]] = field(default_factory=list)  # (option, its operands)
    program: int | None = None  # index of the program, None when absent
    problems: list[tuple[int, str]] = field(default_factory=list)  # (token index, what is wrong)

    def operand(self, tokens: list[str], flags: tuple[str, ...]) -> tuple[str, int] | None:
        """(value, token index) of the first option among `flags` (`-np 4` or `-np=4`)."""
        for index, operands in self.options:
            flag, equals, value = tokens[index].partition("=")
            if flag in flags:
                if equals:
                    return value, index
                if operands:
                    return tokens[operands[0]], operands[0]
        return None


def parse_launch(tokens: list[str]) -> Launch | None:
    """The first mpirun/horovodrun in `tokens` read into options, program and problems; None without one."""
    start = next((i for i, t in enumerate(tokens) if basename(t) in LAUNCHERS), None)
    if start is None:
        return None
    launch = Launch(start)
    index = start + 1
    while index < len(tokens):
        token = tokens[index]
        if token in ("&&", ";", "|"):
            break
        if token == "--":
            index += 1
            break
        if not token.startswith("-") or len(token) == 1:
            break
        operands = list(range(index + 1, min(index + 1 + _operands(token), len(tokens))))
        for at in operands:
            if tokens[at].startswith("-") and not is_count(tokens[at].lstrip("-")):
                launch.problems.append((index, f"{token} needs an operand but is followed by {tokens[at]}"))
        if len(operands) < _operands(token):
            launch.problems.append((index, f"{token} needs an operand but ends the command line"))
        launch.options.append((index, operands))
        _check_operand(launch, tokens, index, operands)
        index = (operands[-1] if operands else index) + 1
    if index >= len(tokens) or tokens[index] in ("&&", ";", "|"):
        launch.problems.append((len(tokens) - 1, f"{tokens[start]} has no program to start after its options"))
        return launch
    launch.program = index
    _check_program(launch, tokens, index)
    return launch


def _check_operand(launch: Launch, tokens: list[str], index: int, operands: list[int]) -> None:
    flag = tokens[index].partition("=")[0].lstrip("-")
    if not operands or launch.problems and launch.problems[-1][0] == index:
        return
    value = tokens[operands[0]]
    if flag == "x":
        if PYTHONS.match(basename(value)) or basename(value) in SHELLS:
            launch.problems.append((index, f"-x has no operand: {value} starts the program"))
        elif not _VARIABLE.match(value):
            launch.problems.append((operands[0], f"-x {value} is not NAME or NAME=value"))
    elif {f"-{flag}", f"--{flag}"} & set(PROCESS_COUNT_FLAGS) and (not is_count(value) or int(value) < 1):
        launch.problems.append((operands[0], f"{tokens[index]} {value} is not a number of processes"))


def _check_program(launch: Launch, tokens: list[str], index: int) -> None:
    """A Python program must name its module (`-m package.module`) or its script."""
    if not PYTHONS.match(basename(tokens[index])):
        return
    at = index + 1
    while at < len(tokens) and tokens[at].startswith("-"):
        option = tokens[at]
        if option == "-m":
            if at + 1 >= len(tokens):
                launch.problems.append((at, "python -m has no module to run"))
            elif not _MODULE.match(tokens[at + 1]):
                launch.problems.append((at + 1, f"python -m needs a module name, not {tokens[at + 1]}"))
            return
        if option == "-c":
            return
        at += 2 if option in _PYTHON_OPERAND else 1
    if at >= len(tokens):
        launch.problems.append((index, f"{tokens[index]} has no module (-m) or script to run"))


def exported_variables(container: Container) -> dict[str, str | None]:
    """NAME -> value of every `-x` of the container's mpirun: `-x NAME=value` gives value, `-x NAME` the
    container's own env value (None when the container sets none, or takes it from a reference)."""
    tokens, _ = launch_tokens(container)
    launch = parse_launch(tokens)
    own = {str(e.get("name")): e.get("value") for e in container.env if isinstance(e, dict)}
    found = {}
    for index, operands in launch.options if launch else []:
        flag, equals, inline = tokens[index].partition("=")
        if flag not in ("-x", "--x"):
            continue
        word = inline if equals else tokens[operands[0]] if operands else ""
        name, has_value, value = word.partition("=")
        found[name] = value if has_value else own.get(name)
    return found


def process_count(tokens: list[str]) -> tuple[str, int] | None:
    """(value of -np, token index) for the first mpirun/horovodrun in `tokens`, if any."""
    launch = parse_launch(tokens)
    return launch.operand(tokens, PROCESS_COUNT_FLAGS) if launch else None


# --- MPIJobs --------------------------------------------------------------------------------------


def mpijobs(objects) -> list:
    return [m for m in objects if m.group_kind == MPIJOB]


def replica_templates(manifest) -> dict[str, PodTemplate]:
    return {t.role: t for t in pod_templates(manifest)}


def slots_per_worker(manifest) -> int:
    slots = mapping(manifest.doc, "spec").get("slotsPerWorker", 1)
    return slots if isinstance(slots, int) and not isinstance(slots, bool) else 1
