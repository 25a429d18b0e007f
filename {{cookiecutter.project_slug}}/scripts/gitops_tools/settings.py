"""The repository's settings file, platform.yaml, which the template renders."""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import InputError

FILE = "platform.yaml"


def load(root: Path) -> dict:
    path = root / FILE
    try:
        settings = yaml.safe_load(path.read_text()) or {}
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{path}: invalid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(settings.get("schemas"), dict):
        raise InputError(f"{path}: no 'schemas' mapping")
    return settings
