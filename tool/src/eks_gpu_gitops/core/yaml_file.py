"""Reading one YAML file the repository's tools need, with one-line errors."""

from __future__ import annotations

from pathlib import Path

import yaml

from . import yaml_limits
from .errors import InputError


def load_mapping(path: Path, shown: str | Path | None = None) -> dict:
    """The file's content as a dict ({} when empty); `shown` names it in errors (default: the path)."""
    name = shown if shown is not None else path
    try:
        content = yaml_limits.load(path.read_text()) or {}
    except OSError as error:
        raise InputError(f"{name}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{name}: invalid YAML: {str(error).splitlines()[0]}") from None
    return content if isinstance(content, dict) else {}
