"""The repository's settings file, platform.yaml, which the template renders."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError
from .yaml_file import load_mapping

FILE = "platform.yaml"


def load(root: Path) -> dict:
    path = root / FILE
    settings = load_mapping(path)
    if not isinstance(settings.get("schemas"), dict):
        raise InputError(f"{path}: no 'schemas' mapping")
    return settings


def new_environment_defaults(root: Path) -> dict:
    """cluster_name_prefix, region and availability_zone for scripts/new-environment."""
    path = root / FILE
    defaults = load(root).get("new_environment")
    keys = ("cluster_name_prefix", "region", "availability_zone")
    if not isinstance(defaults, dict) or any(not isinstance(defaults.get(k), str) or not defaults[k] for k in keys):
        raise InputError(f"{path}: new_environment needs {', '.join(keys)} (the template writes them)")
    return {k: defaults[k] for k in keys}
