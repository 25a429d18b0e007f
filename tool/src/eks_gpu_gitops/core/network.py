"""Whether the tools may use the network: --offline, or GITOPS_OFFLINE=1, forbids it (charts then come only from
the chart cache)."""

from __future__ import annotations

import os

OFFLINE_VARIABLE = "GITOPS_OFFLINE"


def offline() -> bool:
    return os.environ.get(OFFLINE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")
