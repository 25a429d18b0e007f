"""The rule catalogue. Importing this package registers every rule; `all_rules()` lists them in
catalogue order (by category, then id), which is the order of docs/rules.md."""

from __future__ import annotations

from . import (
    apis,  # noqa: F401
    capacity,  # noqa: F401
    efa,  # noqa: F401
    flux,  # noqa: F401
    gpus,  # noqa: F401
    hygiene,  # noqa: F401
    mpijob,  # noqa: F401
    node_health,  # noqa: F401
    ordering,  # noqa: F401
    podsecurity,  # noqa: F401
    scheduling,  # noqa: F401
    stages,  # noqa: F401
    storage,  # noqa: F401
)
from .registry import CONTEXTS, REGISTRY, Finding, Rule, all_rules

__all__ = ["CONTEXTS", "REGISTRY", "Finding", "Rule", "all_rules"]
