"""Machine-readable output: the whole Report as one JSON document (masked diffs only).

An object's status is added, removed, changed or moved (to another namespace: `namespace_move` holds
{"from", "to"}, null otherwise); `broken` lists the environments left out because they do not render.
"""

from __future__ import annotations

import json

from ..model import MOVED, STATUSES, EnvironmentDiff, Figure, ObjectChange, Report, Side


def render(report: Report) -> str:
    document = {
        "base": _side(report.base),
        "head": _side(report.head),
        "has_changes": report.has_changes,
        # Environments left out because a side does not render them (the command exits 2).
        "broken": [{"name": broken.name, "error": broken.error} for broken in report.broken],
        "environments": [_environment(env) for env in report.environments],
    }
    return json.dumps(document, indent=2) + "\n"


def _side(side: Side) -> dict:
    return {"label": side.label, "ref": side.ref or None, "commit": side.commit or None}


def _figure(value: Figure) -> dict:
    return {
        "before": value.before,
        "after": value.after,
        "before_detail": value.before_detail,
        "after_detail": value.after_detail,
    }


def _environment(env: EnvironmentDiff) -> dict:
    return {
        "name": env.name,
        "status": env.status or "unchanged",
        "counts": {status: env.count(status) for status in STATUSES},
        "mpijob_gpus": _figure(env.mpijob_gpus),
        "gpu_quota": _figure(env.gpu_quota),
        "gpu_capacity": _figure(env.gpu_capacity),
        "notices": [
            {"id": n.id, "severity": n.severity, "resource": n.resource, "title": n.title, "message": n.message}
            for n in env.notices
        ],
        "objects": [_object(change) for change in env.changes],
    }


def _object(change: ObjectChange) -> dict:
    key = change.key
    return {
        "status": change.status,
        "group": key.group,
        "kind": key.kind,
        "namespace": key.namespace,
        "name": key.name,
        "resource": key.resource,
        "source": change.source,
        "moved_from": change.moved_from or None,
        # A move to another namespace: "namespace" is the new one.
        "namespace_move": {"from": change.from_namespace, "to": key.namespace} if change.status == MOVED else None,
        "additions": change.additions,
        "deletions": change.deletions,
        "diff": change.diff,
    }
