"""Issue 25, point 3: `scripts/diff --live` shows nothing left to apply once Flux has reconciled.

Nothing left to apply: `scripts/diff --live --env ENV --exit-code` exits 0, that is, the tool finds no object to
add, change or remove between the environment's render of the served commit and the cluster, and it prints no
object the API server refused to dry-run (a refusal hides what it would change)."""

from __future__ import annotations


def test_scripts_diff_live_shows_nothing_left_to_apply(loop):
    done = loop.script("diff", "--live", "--env", loop.env, "--exit-code")
    headings = [line for line in done.stdout.splitlines() if line[:2] in ("+ ", "~ ", "- ")]
    refused = [line for line in done.stderr.splitlines() if "refuses" in line]
    assert done.returncode == 0 and not headings and not refused, (
        f"scripts/diff --live --env {loop.env} exited {done.returncode}; objects it would still apply or prune:\n"
        + "\n".join(headings)
        + f"\nrefused by the API server ({len(refused)}):\n"
        + "\n".join(line[:300] for line in refused[:8])
    )
