"""Run Kustomize: the standalone `kustomize` binary when installed, else `kubectl kustomize`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from .credentials import mask_text
from .errors import InputError

# kustomize-controller builds with this restrictor, so a render here matches what Flux applies.
FLAGS = ["--load-restrictor", "LoadRestrictionsNone"]
# The file names kustomize reads a folder's kustomization from.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# kubectl logs its error through klog: `E1123 01:54:05.362503  32540 run.go:72] "command failed" err="..."`,
# or `err=<` followed by indented lines and `>` when the message has several lines.
# A replacement's source field is gone: a guard of an environment component tripped.
_REPLACEMENT_SOURCE_MISSING = re.compile(r"is missing for replacement source|nothing selected by")
_KLOG_ERROR = re.compile(r'^[EWIF]\d{4} \S+\s+\d+ \S+\] "command failed" err=(.*)$')


@lru_cache(maxsize=1)
def command() -> tuple[str, ...]:
    if shutil.which("kustomize"):
        return ("kustomize", "build")
    if shutil.which("kubectl"):
        return ("kubectl", "kustomize")
    raise InputError("neither kustomize nor kubectl is installed; install one of them (kubectl includes kustomize)")


def has_kustomization(folder: Path) -> bool:
    return any((folder / name).is_file() for name in KUSTOMIZATION_FILES)


def is_component(folder: Path) -> bool:
    """Whether the folder's kustomization is a Component, which only builds inside another one."""
    for name in KUSTOMIZATION_FILES:
        try:
            text = (folder / name).read_text()
        except (OSError, UnicodeDecodeError):
            continue
        return bool(re.search(r"^kind:\s*Component\s*$", text, re.MULTILINE))
    return False


# Where kustomize repeats the configuration it read (secrets included) in an error, and what is kept
# (kustomize/v5.5.0, the version in kubectl 1.32, and v5.8.1): kyaml/yaml/fns.go's `: node contents:\n<yaml>`,
# and api/kv/kv.go's literal sources (`literal sources [...]`, `invalid literal source %v, expected
# key=value`) and env-file lines (`line %d has invalid utf8 bytes : %v`).
_ECHOES = (
    (re.compile(r":? *node contents:.*", re.DOTALL), ""),
    (re.compile(r"literal sources \[.*?\]: invalid literal source .*?, expected key=value"),
     "invalid literal source (value not shown), expected key=value"),
    (re.compile(r"(has invalid utf8 bytes) : .*"), r"\1"),
)  # fmt: skip


def error_cause(stderr: str) -> str:
    """The message of a failed build, without kubectl's log prefix and quoting, without the
    configuration kustomize echoes (it may hold secrets) and with credential shapes masked."""
    return mask_text(_without_echoes(_logged_cause(stderr)))


def _without_echoes(message: str) -> str:
    for pattern, replacement in _ECHOES:
        message = pattern.sub(replacement, message)
    return message.strip()


def _logged_cause(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        logged = _KLOG_ERROR.match(line)
        if not logged:
            continue
        value = logged.group(1)
        if value == "<":
            return " ".join(part.strip() for part in lines[index + 1 :] if part.strip() != ">")
        try:
            return str(json.loads(value))
        except ValueError:
            return value.strip('"')
    errors = [line for line in lines if line.startswith("Error: ")]  # the standalone kustomize binary
    return (errors[0] if errors else lines[-1] if lines else "").removeprefix("Error: ")


def build(path: Path) -> str:
    """The rendered YAML stream of the kustomization in `path`."""
    if not has_kustomization(path):
        raise InputError(f"{path}: no kustomization.yaml")
    try:
        result = subprocess.run([*command(), *FLAGS, str(path)], capture_output=True, text=True)
    except OSError as error:
        raise InputError(f"{path}: cannot run {command()[0]}: {error.strerror}") from None
    if result.returncode != 0:
        cause = error_cause(result.stderr) or f"{command()[0]} exited with status {result.returncode}"
        if _REPLACEMENT_SOURCE_MISSING.search(cause):
            cause += (
                " (the environment components, overlays/base/*/environment, copy overlays/<env>/settings.yaml "
                "into the bases by name and stop when the settings or a named item they fill in is gone)"
            )
        raise InputError(f"{path}: kustomize build failed: {cause}")
    return result.stdout
