"""A repository's settings for the tool, platform.yaml (the template writes one): the schemas it pins, where
new-environment starts from, and sources of CRDs rendering cannot see (crd_providers). Every key is optional."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..core.yaml_file import load_mapping
from ..facts.schemas import SCHEMAS

FILE = "platform.yaml"


def load(root: Path) -> dict:
    """The settings of the repository at `root`; {} where it has no platform.yaml."""
    path = root / FILE
    if not path.is_file():
        return {}
    settings = load_mapping(path)
    if not isinstance(settings.get("schemas", {}), dict):
        raise InputError(f"{path}: 'schemas' must be a mapping of group/Kind to the URL of its schema")
    return settings


def schema_sources(root: Path) -> dict:
    """group/Kind -> URL of its schema: the tool's pins (facts/schemas.py), with the repository's over them."""
    return {**SCHEMAS, **(load(root).get("schemas") or {})}


def new_environment_defaults(root: Path) -> dict:
    """cluster_name_prefix, region and availability_zone for new-environment."""
    path = root / FILE
    defaults = load(root).get("new_environment")
    keys = ("cluster_name_prefix", "region", "availability_zone")
    if not isinstance(defaults, dict) or any(not isinstance(defaults.get(k), str) or not defaults[k] for k in keys):
        raise InputError(f"{path}: new_environment needs {', '.join(keys)} (the template writes them)")
    return {k: defaults[k] for k in keys}
