"""The connection to the cluster the kubeconfig points at, for status, validate --server and diff --live.

Every way it can fail (no kubeconfig, an unknown context, an API server that does not answer or refuses the
credentials, before the first real question or at any later one) is one line: an InputError, exit status 2.
The message names the server (without the user and password a kubeconfig's URL may carry), the context, and an
answer's status and reason, never a token, a certificate, or an answer's headers and body (`cluster_errors`:
the client's own ApiException prints them whole, the dynamic client's adds a traceback).
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass

from ..core.credentials import mask_text, without_userinfo
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


def _first_line(error) -> str:
    """An error's (or a reason's) first line, masked, without a URL's userinfo; its type's name when it says
    nothing."""
    text = str(error).strip()
    return mask_text(without_userinfo(text.splitlines()[0])) if text else type(error).__name__


def server_of(api) -> str:
    """The API server a client talks to, as it is shown: its URL without userinfo."""
    return mask_text(without_userinfo(getattr(getattr(api, "configuration", None), "host", "") or "the cluster"))


def api_error(error: BaseException, server: str, context: str | None = None) -> InputError:
    """One line for what the API server answered (status and reason) or why it could not be reached, masked."""
    from kubernetes.client.rest import ApiException

    where = f"the API server at {server}" + (f" (context {context!r})" if context else "")
    if isinstance(error, ApiException) and error.status:  # status 0: the client's own failure (TLS)
        reason = mask_text(" ".join(str(error.reason or "").split())) or "no reason"
        return InputError(f"{where} answered {error.status} {reason}")
    cause = error.reason if isinstance(error, ApiException) else getattr(error, "reason", None)
    if not isinstance(cause, (BaseException, str)) or not str(cause).strip():
        cause = error
    return InputError(f"cannot reach {where}: {_first_line(cause)}")


@contextlib.contextmanager
def cluster_errors(server: str, context: str | None = None):
    """Turns what the client raises when the server refuses or cannot be reached (ApiException and the dynamic
    client's errors, urllib3's, a kubeconfig's) into one line: an InputError (api_error)."""
    from kubernetes.client.rest import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    try:
        yield
    except (ApiException, HTTPError) as error:
        raise api_error(error, server, context) from None
    except ConfigException as error:
        where = f"context {context!r}" if context else f"the kubeconfig of {server}"
        raise InputError(f"{where}: {_first_line(error)}") from None


def one_line_errors(function):
    """`function` of the cluster (its first argument a Cluster or the client of one) with cluster_errors around
    it: every question it asks that fails is one line."""

    @functools.wraps(function)
    def asking(cluster, *args, **kwargs):
        api = getattr(cluster, "api", cluster)
        with cluster_errors(server_of(api), getattr(cluster, "context", None)):
            return function(cluster, *args, **kwargs)

    return asking


def _contexts(kubeconfig: str | None):
    from kubernetes import config

    try:
        return config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError, TypeError, ValueError) as error:
        raise InputError(f"no usable kubeconfig at {_kubeconfig_files(kubeconfig)}: {_first_line(error)}") from None


def connect(context: str | None = None, kubeconfig: str | None = None) -> Cluster:
    """A client for `context` (default: the kubeconfig's current one), checked with one request."""
    from kubernetes import client, config

    # The client reads $KUBECONFIG once, when it is imported: read it here, so the current value counts.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    contexts, current = _contexts(kubeconfig)
    names = [c.get("name") for c in contexts or []]
    chosen = context or (current or {}).get("name")
    if not chosen:
        raise InputError(f"{_kubeconfig_files(kubeconfig)}: no current context; name one with --context")
    if chosen not in names:
        known = ", ".join(sorted(str(n) for n in names if n)) or "none"
        raise InputError(f"unknown context {chosen!r} in {_kubeconfig_files(kubeconfig)}; known: {known}")
    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=chosen)
    except (config.ConfigException, OSError, TypeError, ValueError) as error:
        raise InputError(f"context {chosen!r}: {_first_line(error)}") from None
    server = server_of(api)
    with cluster_errors(server, chosen):
        try:
            version = client.VersionApi(api).get_code(_request_timeout=PROBE_TIMEOUT).git_version
        except OSError as error:
            raise api_error(error, server, chosen) from None
    return Cluster(api=api, context=chosen, server=server, version=version)


def wait_established(extensions, names: list[str], timeout: float) -> None:
    """Wait until the API server serves each CRD named (its Established condition True)."""
    import time

    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            conditions = extensions.read_custom_resource_definition(name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise InputError(f"CRD {name} not established after {timeout:.0f} s")
            time.sleep(0.1)
