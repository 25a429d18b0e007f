"""`python -m gitops_tools VERB [ARGS]`: what scripts/VERB runs (through scripts/run-tool).

Importing a verb is the first thing that needs the tooling environment's packages, so a missing
one (after a `make setup` that did not finish) is reported here in one line, like every error.
"""

from __future__ import annotations

import importlib
import sys

# Verb -> the module whose main(argv) runs it.
VERBS = {
    "render": "gitops_tools.render",
    "validate": "gitops_tools.validate.__main__",
    "diff": "gitops_tools.diff.__main__",
    "new-environment": "gitops_tools.new_environment",
    "new-job": "gitops_tools.new_job",
    "cluster-settings": "gitops_tools.cluster_settings",
    "status": "gitops_tools.live.status",
    "simulate": "gitops_tools.live.simulate",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in VERBS:
        print(f"gitops_tools: name a verb: {', '.join(VERBS)}", file=sys.stderr)
        sys.exit(2)
    verb = sys.argv[1]
    try:
        module = importlib.import_module(VERBS[verb])
    except ModuleNotFoundError as error:
        print(
            f"{verb}: the tooling environment lacks the Python package {error.name}; run 'make setup'", file=sys.stderr
        )
        sys.exit(2)
    from .cli import exit_with

    exit_with(lambda argv: module.main(sys.argv[2:]))


if __name__ == "__main__":
    main()
