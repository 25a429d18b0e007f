"""The rule catalogue. Importing this package registers every rule; `all_rules()` lists them in
catalogue order (by category, then id), which is the order of docs/rules.md."""

from __future__ import annotations

from . import apis, efa, gpus, hygiene, mpijob, ordering, scheduling, stages, storage  # noqa: F401  (registers)
from .registry import CONTEXTS, REGISTRY, Finding, Rule

CATEGORY_ORDER = ("Sources and schemas", "MPIJob", "GPUs", "Scheduling", "EFA", "FSx for Lustre", "Ordering",
                  "Removed APIs and versions", "Hygiene and security")


def all_rules() -> list[Rule]:
    return sorted(REGISTRY.values(), key=lambda r: (CATEGORY_ORDER.index(r.category), r.id))


__all__ = ["CONTEXTS", "REGISTRY", "Finding", "Rule", "all_rules"]
