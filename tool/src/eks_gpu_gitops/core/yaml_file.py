"""Reading one YAML file the repository's tools need, with one-line errors."""

from __future__ import annotations

from pathlib import Path

import yaml

from . import yaml_limits
from .errors import InputError
from .files import Unreadable, read_bounded


def load_mapping(path: Path, shown: str | Path | None = None) -> dict:
    """The file's content as a dict ({} when empty); `shown` names it in errors (default: the path). A FIFO, a
    device or a file over yaml_limits.MAX_FILE_BYTES is refused rather than read."""
    name = shown if shown is not None else path
    try:
        text = read_bounded(path, yaml_limits.MAX_FILE_BYTES, follow_links=True).decode()
        content = yaml_limits.load(text) or {}
    except Unreadable as error:
        raise InputError(f"{name}: cannot read: {error}") from None
    except UnicodeDecodeError:
        raise InputError(f"{name}: cannot read: not UTF-8 text") from None
    except yaml.YAMLError as error:
        raise InputError(f"{name}: invalid YAML: {str(error).splitlines()[0]}") from None
    return content if isinstance(content, dict) else {}


def read_ahead(path: Path, shown: str | Path) -> list:
    """The documents of a repository file a tool reads ahead of a build or of yamllint (to find folders, to refuse
    what Flux would refuse): [] when it is no small regular file, no text or no YAML, which the build or yamllint
    reports in its own words; a one-line InputError naming `shown` when it is past a limit of yaml_limits (its
    nesting, its aliases), before anything walks it."""
    try:
        return yaml_limits.load_all(read_bounded(path, yaml_limits.MAX_FILE_BYTES, follow_links=True).decode())
    except yaml_limits.LimitError as error:
        raise InputError(f"{shown}: {error}") from None
    except (Unreadable, UnicodeDecodeError, yaml.YAMLError):
        return []
