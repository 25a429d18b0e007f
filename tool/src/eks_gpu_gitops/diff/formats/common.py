"""Small phrases every format shares."""

from __future__ import annotations

from ..model import ADDED, REMOVED, STATUS_SIGN, STATUSES, EnvironmentDiff, Figure, Notice, ObjectChange, Report

ARROW = "->"
NO_CHANGES = "No changes in the rendered manifests."
# When an environment does not render: nothing can be said about it.
NO_CHANGES_IN_OTHERS = "No changes in the environments that render."


def number(value: int | None) -> str:
    return "?" if value is None else str(value)


def figure(value: Figure, arrow: str = ARROW) -> str:
    """ "16 -> 32", or "16" when it did not change."""
    if not value.changed:
        return number(value.after)
    return f"{number(value.before)} {arrow} {number(value.after)}"


def how(value: Figure, arrow: str = ARROW) -> str:
    """How a figure is made up: "a: 2 workers x 8 -> a: 4 workers x 8", or one side when unchanged."""
    if not value.changed:
        return value.after_detail
    return f"{value.before_detail or 'none'} {arrow} {value.after_detail or 'none'}"


def figures(env: EnvironmentDiff) -> list[tuple[str, Figure]]:
    """The impact figures with their names, in the order every format shows them."""
    return [("MPIJob GPUs", env.mpijob_gpus), ("GPU quota", env.gpu_quota), ("GPU node capacity", env.gpu_capacity)]


def figure_lines(env: EnvironmentDiff, arrow: str = ARROW) -> list[str]:
    lines = []
    for name, value in figures(env):
        detail = how(value, arrow)
        if detail:
            lines.append(f"{name} {figure(value, arrow)}: {detail}")
    return lines


def counts(env: EnvironmentDiff) -> str:
    """ "+1 ~2 >3 -1" style counts (added, changed, moved, removed), leaving out the zeros ("no change" when
    all are)."""
    parts = [f"{STATUS_SIGN[status]}{env.count(status)}" for status in STATUSES if env.count(status)]
    return " ".join(parts) or "no change"


def env_title(env: EnvironmentDiff) -> str:
    suffix = {ADDED: " (new)", REMOVED: " (removed)"}.get(env.status, "")
    return f"{env.name}{suffix}"


def owner(change: ObjectChange) -> str:
    """Who applies the object: a Flux Kustomization, eksctl, or the cluster entry point."""
    if change.source == "eksctl":
        owned = "eksctl (not applied by Flux)"
    elif change.source:
        owned = f"Kustomization {change.source}"
    else:
        owned = f"clusters/{change.key.env}"
    if change.moved_from:
        owned += f", moved from Kustomization {change.moved_from}"
    return owned


def stat(change: ObjectChange) -> str:
    return f"+{change.additions} -{change.deletions}"


def grouped_notices(report: Report) -> list[tuple[str, Notice]]:
    """Notices most serious first; one that reads the same in several environments is listed
    once, with their names joined ("dev, prod")."""
    groups: dict[tuple, list[str]] = {}
    first: dict[tuple, Notice] = {}
    for env_name, notice in report.notices:
        key = (notice.id, notice.severity, notice.resource, notice.title, notice.message)
        groups.setdefault(key, []).append(env_name)
        first.setdefault(key, notice)
    return [(", ".join(names), first[key]) for key, names in groups.items()]
