"""Grow or shrink an environment's GPU node group, or give it another instance type, in one change.

    scripts/scale ENV --nodes N [--instance-type T]
    scripts/scale ENV --check

Reads overlays/ENV/settings.yaml, makes the environment it describes with N nodes (of type T), and writes every
figure that follows from the gpu node group with the functions new-environment writes them with
(generate/environment.py): gpuNodeGroup's maxSize, instanceType and autoscaler tags (the EFA interfaces per
node), the Kueue queue's quota (queue.resourceGroups: what the group holds at maxSize), and horovod-train's
workers, slotsPerWorker, mpirun's -np, worker resources and shared memory; the header line of settings.yaml;
and the environment's row in the README's table of environments. Everything else in the file stays as it is:
comments, other fields, a tag or an mpirun option of your own, ncclDebug.

The options are checked by the same code as new-environment's (generate/answers.py): --nodes is 1 to EKS's
default quota of nodes per managed node group, 450, or 64 for a Capacity Block (facts/limits.py), --instance-type
a known GPU type the trainer image runs on. An environment whose nodes launch into a capacity reservation keeps
its instance type (a reservation is for one type), and one with EFA on keeps a type with EFA; new-environment
makes an environment with other choices. Then the changed repository is validated in a scratch copy, with the
repository's .eks-gpu-gitops.yaml: any error (an MPIJob added by new-job that asks more workers than the new
size, say) refuses the change with that error. A refusal writes nothing; otherwise the files are replaced at
once, and each figure that changed is printed, old -> new. Jobs added by new-job keep their own sizes.

--check writes nothing: it exits 1 when the README's row of ENV is not what overlays/ENV/settings.yaml says
(a hand edit of the settings that left the table behind), naming the scale command that makes them agree.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..core.errors import InputError
from ..render.repository import environment_names
from . import answers, readme
from .environment import EnvironmentSpec, readme_row, settings, settings_text, spec_from_settings
from .files import write_all
from .yaml_edit import edited

README = "README.md"
# The figures that follow from the gpu node group, by section: scale writes these, and nothing else, from
# settings() of the environment with its new node group.
FOLLOW_THE_NODE_GROUP = {
    "gpuNodeGroup": ("instanceType", "maxSize", "tags"),
    "queue": ("resourceGroups",),
    "training": ("workers", "slotsPerWorker", "launcherCommand", "workerResources", "sharedMemory"),
}
# Besides the top folders the environment's Flux Kustomizations point into, what validate reads.
VALIDATED = ("clusters", "overlays", "platform.yaml", ".yamllint")


@dataclass(frozen=True)
class Change:
    where: str  # a file, and a field path in it
    old: object
    new: object

    def line(self) -> str:
        return f"{self.where}: {_shown(self.old)} -> {_shown(self.new)}"


def _shown(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list | dict):
        return " ".join(str(item) for item in value) if isinstance(value, list) else str(dict(value))
    return str(value)


def settings_file(env: str) -> str:
    return f"overlays/{env}/settings.yaml"


# --- the environment as it is, and as it will be --------------------------------------------------


def read_spec(root: Path, env: str) -> EnvironmentSpec:
    """The environment overlays/ENV/settings.yaml describes (environment.spec_from_settings)."""
    problem = answers.check_line(env, "ENV") or answers.check_slug(env, "ENV")
    if problem:
        raise InputError(problem)
    path = root / settings_file(env)
    if not path.is_file():
        known = [name for name in environment_names(root) if (root / settings_file(name)).is_file()]
        raise InputError(
            f"ENV: {env!r} is not an environment of this repository ({settings_file(env)} is missing); "
            f"name one of {', '.join(known) or 'none'}"
        )
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise InputError(f"{settings_file(env)}: cannot read: {' '.join(str(error).split())}") from None
    try:
        return spec_from_settings(env, document)
    except InputError as error:
        raise InputError(f"{settings_file(env)}: {error}; scale reads what new-environment writes") from None


def _other_choices(env: str) -> str:
    return f"`scripts/new-environment` makes an environment with other choices than {env}'s"


def check_instance_type(spec: EnvironmentSpec, instance_type: str) -> None:
    """A type new-environment takes, that the environment's reservation and EFA allow."""
    problem = answers.check_line(instance_type, "--instance-type") or answers.check_gpu_instance_type(
        instance_type, "--instance-type"
    )
    if problem:
        raise InputError(problem)
    if instance_type == spec.instance_type:
        return
    if spec.capacity_reservation:
        raise InputError(
            f"--instance-type: {spec.name}'s GPU nodes launch into capacity reservation {spec.capacity_reservation}, "
            f"which is for {spec.instance_type} only; keep {spec.instance_type}, or {_other_choices(spec.name)}"
        )
    if spec.efa and not answers.parse_efa("on", instance_type)[0]:
        raise InputError(
            f"--instance-type: {instance_type!r} has no EFA interface, and {spec.name} has EFA on; choose an EFA type "
            f"such as p4d.24xlarge or p5.48xlarge, or {_other_choices(spec.name)}"
        )


def plan(root: Path, env: str, nodes: object, instance_type: str | None) -> tuple[EnvironmentSpec, EnvironmentSpec]:
    """(the environment as its settings describe it, the environment with the new node group), the options
    checked as new-environment checks them."""
    spec = read_spec(root, env)
    problem = answers.check_line(str(nodes), "--nodes")
    if problem:
        raise InputError(problem)
    count, problem = answers.parse_node_count(nodes, spec.capacity_block, "--nodes")
    if problem:
        raise InputError(problem)
    check_instance_type(spec, instance_type or spec.instance_type)
    new = dataclasses.replace(spec, nodes=count, instance_type=instance_type or spec.instance_type)
    if new.spot:
        problem = answers.check_spot(new.name, new.efa, new.capacity_reservation)
        if problem:
            raise InputError(problem)
    return spec, new


# --- the new text of the files --------------------------------------------------------------------


def _label(label: str, index: int, item: object) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return f"{label}[{name if isinstance(name, str) else index}]"


def _update(container, key, new, label: str, changes: list[Change]) -> None:
    """Make container[key] `new`, keeping what is already equal (and its comments and quotes) and the keys of a
    mapping that `new` does not have; record each value that changes."""
    present = key in container if isinstance(container, dict) else key < len(container)
    old = container[key] if present else None
    if isinstance(old, dict) and isinstance(new, dict):
        for name, value in new.items():
            _update(old, name, value, f"{label}.{name}", changes)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, value in enumerate(new):
            _update(old, index, value, _label(label, index, old[index]), changes)
    elif not present or old != new or isinstance(old, bool) != isinstance(new, bool):
        container[key] = new
        changes.append(Change(label, old, new))


def _update_processes(training: dict, command: list[str], label: str, changes: list[Change]) -> None:
    """mpirun's -np in the launcher's command, keeping options of the user's own; the whole command when it has
    no -np to change."""
    current = training.get("launcherCommand")
    processes = command[command.index("-np") + 1]
    if isinstance(current, list) and "-np" in current[:-1]:
        _update(current, current.index("-np") + 1, processes, f"{label} -np", changes)
    else:
        _update(training, "launcherCommand", command, label, changes)


def _header(text: str, env: str, line: str, changes: list[Change], where: str) -> str:
    """`text` with its summary line (`# ENV: ...` after `---`) replaced by `line`."""
    lines = text.splitlines(keepends=True)
    summary = len(lines) > 1 and lines[0].rstrip() == "---" and lines[1].startswith(f"# {env}: ")
    if summary and lines[1].rstrip("\n") != line:
        changes.append(Change(f"{where} header", lines[1].rstrip("\n")[2:], line[2:]))
        lines[1] = line + "\n"
    return "".join(lines)


def settings_edit(root: Path, new: EnvironmentSpec) -> tuple[str, list[Change]]:
    """The new text of the environment's settings.yaml, and what changed in it."""
    where = settings_file(new.name)
    generated = settings(new)
    changes: list[Change] = []

    def change(document) -> None:
        for section, keys in FOLLOW_THE_NODE_GROUP.items():
            if not isinstance(document.get(section), dict):
                raise InputError(f"{where}: {section} is not a mapping as new-environment writes it")
            for key in keys:
                label = f"{where} {section}.{key}"
                if key == "launcherCommand":
                    _update_processes(document[section], generated[section][key], label, changes)
                else:
                    _update(document[section], key, generated[section][key], label, changes)

    text = edited(root / where, change)
    return _header(text, new.name, settings_text(new).splitlines()[1], changes, where), changes


def readme_edit(root: Path, new: EnvironmentSpec) -> tuple[str | None, list[Change]]:
    """The README's new text with the environment's row replaced (None when it has no table), and the change."""
    path = root / README
    if not path.is_file():
        return None, []
    text = path.read_text()
    row = readme_row(new)
    updated = readme.with_row(text, new.name, row)
    if updated is None or updated == text:
        return updated, []
    return updated, [_row_change(new.name, readme.row_of(text, new.name), row)]


def _row_change(env: str, old: str | None, new: str) -> Change:
    """The cells of the environment's README row that change (the whole row when it had none)."""
    where = f"{README} table of environments, {env}"
    if old is None:
        return Change(where, "(no row)", new)
    cells = [
        (before, after) for before, after in zip(old.split(" | "), new.split(" | "), strict=False) if before != after
    ]
    if len(old.split(" | ")) != len(new.split(" | ")) or not cells:
        return Change(where, old, new)
    return Change(where, " | ".join(before for before, _ in cells), " | ".join(after for _, after in cells))


def has_table(root: Path) -> bool:
    """Whether there is a README with its table of environments (its marker comments)."""
    path = root / README
    return path.is_file() and readme.with_rows(path.read_text(), []) is not None


def stale_row(root: Path, env: str) -> str | None:
    """Why the README's row of `env` is not what its settings say; None when it is (or there is no table)."""
    spec = read_spec(root, env)
    path = root / README
    text = path.read_text() if path.is_file() else ""
    row = readme.row_of(text, env)
    if readme.with_row(text, env, readme_row(spec)) in (None, text):
        return None
    found = f"says {row!r}" if row else "has no row for it"
    return (
        f"{README}: the table of environments {found}, but {settings_file(env)} says {readme_row(spec)!r}; "
        f"`scripts/scale {env} --nodes {spec.nodes}` writes the row and every figure that follows from the node group"
    )


# --- validate, in a scratch copy ------------------------------------------------------------------


def _copy_validated(root: Path, copy: Path) -> None:
    from ..validate.plan import source_folders

    copy.mkdir()
    for name in sorted({*VALIDATED, *source_folders(root)}):
        source = root / name
        if source.is_dir():
            shutil.copytree(source, copy / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, copy / name)


def first_error(root: Path, env: str, files: dict[str, str]) -> str | None:
    """validate's first error in `env` with `files` written, checked in a scratch copy with the repository's
    configuration (.eks-gpu-gitops.yaml, found as validate finds it); None when there is none."""
    from ..validate import config
    from ..validate.pipeline import Options, validate  # only needed here; keeps import time low

    schema_dir = Path(os.environ["GITOPS_SCHEMA_DIR"]) if os.environ.get("GITOPS_SCHEMA_DIR") else None
    configuration = config.find(None, root)
    with tempfile.TemporaryDirectory(prefix="scale-") as scratch:
        copy = Path(scratch) / "repository"
        try:
            _copy_validated(root, copy)
        except OSError as error:
            raise InputError(f"cannot copy the repository to validate the change: {error}") from None
        for path, text in files.items():
            (copy / path).write_text(text)
        try:
            result = validate(Options(paths=[copy], envs=[env], schema_dir=schema_dir, config=configuration))
        except InputError as error:
            message = str(error).replace(f"{copy}/", "")
            raise InputError(f"cannot validate the change: {message}; nothing was written") from None
        errors = [f for f in result.findings if f.severity == "error"]
        if not errors:
            return None
        first = errors[0]
        where = f"{first.file}:{first.line}: " if first.file else ""
        return f"{where}{first.rule}: {first.message} ({first.remediation})".replace(f"{copy}/", "")


def scale(root: Path, env: str, nodes: object, instance_type: str | None) -> tuple[EnvironmentSpec, list[Change]]:
    """Check, validate and write the change; what changed (nothing written on a refusal)."""
    _, new = plan(root, env, nodes, instance_type)
    text, changes = settings_edit(root, new)
    table, row_changes = readme_edit(root, new)
    files = {settings_file(env): text} if changes else {}
    if row_changes:
        files[README] = table
    if not files:
        return new, []
    problem = first_error(root, env, files) if changes else None
    if problem:
        raise InputError(f"validate would refuse the change: {problem}; nothing was written")
    write_all(root, files)
    return new, changes + row_changes
