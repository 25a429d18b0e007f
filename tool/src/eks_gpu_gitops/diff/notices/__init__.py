"""What applying an environment's changes does beyond the diff: a catalogue of notices
(catalogue.py), made by pure functions of the two renders. inplace.py: changes that cannot apply
to an existing object; deletions.py: removed and moved objects (to another Flux Kustomization or
namespace); environment.py: a new or removed environment, GPU capacity or quota that changes, and
more GPUs asked for than the node groups hold. context.py is what they read."""

from __future__ import annotations

from ..model import CHANGED, MOVED, REMOVED, Figure, Notice
from . import deletions, environment, inplace
from .catalogue import CATALOGUE, NoticeKind, all_kinds
from .context import Context

__all__ = ["CATALOGUE", "Context", "NoticeKind", "all_kinds", "notices"]


def notices(context: Context, quota: Figure, nodes: Figure) -> list[Notice]:
    found = environment.environment_level(context)
    for change in context.changes:
        if change.status == CHANGED:
            found.extend(deletions.moved(change, context))
            found.extend(inplace.notices(change, context))
        elif change.status in (REMOVED, MOVED):  # a move deletes the old object too
            found.extend(deletions.removed(change, context))
    found.extend(deletions.orphans(context))
    found.extend(environment.capacity_changed(context, quota, nodes))
    found.extend(environment.capacity(context, nodes))
    return found
