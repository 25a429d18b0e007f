"""validate --server: what the cluster says about the rendered environments, as findings. Each object is
dry-run applied as Flux applies it (live/server_apply.py); a refusal and a field the server drops on apply
(a structural CRD schema prunes unknown fields) are errors."""

from __future__ import annotations

import re
from pathlib import Path

from ..core.credentials import mask_text
from ..live.cluster import connect
from ..live.server_apply import Outcome, Run, dropped_fields, dry_run
from ..render.locate import Locator
from ..render.repository import render_repository, repository_root
from .runner import Reported, Result, sort

REJECTED = "server-rejected"
DROPPED = "server-dropped-fields"
REMEDIATION = {
    REJECTED: "Change the object so the cluster accepts it (the message names the admission check or field).",
    DROPPED: "Remove or correct the field: the cluster's schema does not know it (a typo, or a newer API version).",
}
# Server-side apply's answer to a field a schema does not declare (the whole object is refused).
_UNDECLARED = re.compile(r"(\.[A-Za-z0-9_.\-]+): field not declared in schema")


def _reported(rule: str, env: str, outcome: Outcome, message: str, path: tuple = (), locator=None) -> Reported:
    file, line = locator.locate(outcome.manifest, path) if locator else (outcome.manifest.file, 0)
    return Reported(
        rule=rule,
        severity="error",
        env=env,
        file=file,
        line=line,
        resource=outcome.manifest.resource,
        kustomization=outcome.kustomization,
        message=mask_text(message),
        remediation=REMEDIATION[rule],
        path=".".join(str(p) for p in path),
    )


def findings(runs: list[Run], locator=None) -> Result:
    """validate --server's result: refusals and dropped fields, in the report machinery's shape."""
    result = Result(environments=[r.env for r in runs], objects=sum(len(r.outcomes) for r in runs))
    for run in runs:
        result.notes.extend(run.notes)
        for outcome in run.outcomes:
            if outcome.error:
                undeclared = _UNDECLARED.search(outcome.error)
                path = tuple(undeclared.group(1).strip(".").split(".")) if undeclared else ()
                message = f"the server refuses it: {outcome.error}"
                if undeclared:
                    message = (
                        f"the server refuses it: {'.'.join(path)} is not in the cluster's schema for "
                        f"{outcome.manifest.kind} (server-side apply refuses unknown fields): {outcome.error}"
                    )
                result.findings.append(_reported(REJECTED, run.env, outcome, message, path, locator))
            elif outcome.result is not None:
                sent = outcome.sent
                if outcome.manifest.kind == "Secret" and "stringData" in sent:
                    sent = {k: v for k, v in sent.items() if k != "stringData"}  # the server folds it into data
                for path in dropped_fields(sent, outcome.result):
                    where = ".".join(str(p) for p in path)
                    why = "the status subresource ignores it" if path[0] == "status" else "the cluster ignores it"
                    message = f"the server drops {where} on apply ({why})"
                    result.findings.append(_reported(DROPPED, run.env, outcome, message, path, locator))
    sort(result)
    return result


def validate_server(envs: list[str] | None, context: str | None, progress=lambda line: None) -> Result:
    """validate --server: render, connect, dry-run apply each environment."""
    root = repository_root(Path.cwd())
    environments = render_repository(root, envs)
    cluster = connect(context)
    progress(f"server: dry-run apply against {cluster.server} (context {cluster.context}, {cluster.version})")
    return findings([dry_run(cluster.api, environment) for environment in environments], Locator(root))
