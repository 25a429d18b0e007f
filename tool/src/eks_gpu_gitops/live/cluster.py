"""The connection to the cluster the kubeconfig points at, for status, validate --server and diff --live.

Every way it can fail before the first real question (no kubeconfig, an unknown context, an API server
that does not answer or refuses the credentials) is one line: an InputError, exit status 2. The
message names the server and the context, never a token or a certificate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.errors import InputError

# Seconds for the first request: an unreachable endpoint fails fast instead of hanging a CI job.
PROBE_TIMEOUT = 10


@dataclass
class Cluster:
    api: object  # kubernetes.client.ApiClient
    context: str
    server: str
    version: str  # the API server's gitVersion, e.g. v1.34.4


def _kubeconfig_files(kubeconfig: str | None) -> str:
    if kubeconfig:
        return kubeconfig
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _contexts(kubeconfig: str | None):
    from kubernetes import config

    try:
        return config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError, TypeError, ValueError) as error:
        where = _kubeconfig_files(kubeconfig)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"no usable kubeconfig at {where}: {reason}") from None


def connect(context: str | None = None, kubeconfig: str | None = None) -> Cluster:
    """A client for `context` (default: the kubeconfig's current one), checked with one request."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    # The client reads $KUBECONFIG once, when it is imported: read it here, so the current value counts.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    contexts, current = _contexts(kubeconfig)
    names = [c.get("name") for c in contexts or []]
    chosen = context or (current or {}).get("name")
    if not chosen:
        raise InputError(f"{_kubeconfig_files(kubeconfig)}: no current context; name one with --context")
    if chosen not in names:
        known = ", ".join(sorted(n for n in names if n)) or "none"
        raise InputError(f"unknown context {chosen!r} in {_kubeconfig_files(kubeconfig)}; known: {known}")
    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=chosen)
    except (config.ConfigException, OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"context {chosen!r}: {reason}") from None
    server = api.configuration.host
    try:
        version = client.VersionApi(api).get_code(_request_timeout=PROBE_TIMEOUT).git_version
    except ApiException as error:
        raise InputError(
            f"the API server at {server} (context {chosen!r}) answered {error.status} {error.reason}"
        ) from None
    except (HTTPError, OSError) as error:
        reason = str(getattr(error, "reason", None) or error).strip().splitlines()[0]
        raise InputError(f"cannot reach the API server at {server} (context {chosen!r}): {reason}") from None
    return Cluster(api=api, context=chosen, server=server, version=version)
