"""The rule catalogue. Importing this package registers every rule; `all_rules()` lists them in
catalogue order (by category, then id), which is the order of docs/rules.md."""

from __future__ import annotations

from . import (  # noqa: F401
    apis,
    capacity,
    efa,
    flux,
    gpus,
    hygiene,
    mpijob,
    ordering,
    podsecurity,
    scheduling,
    stages,
    storage,
)
from .registry import CONTEXTS, REGISTRY, Finding, Rule, all_rules

__all__ = ["CONTEXTS", "REGISTRY", "Finding", "Rule", "all_rules"]
