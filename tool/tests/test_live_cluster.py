"""The connection every live-cluster command starts with, against a real kube-apiserver: what it
answers, and the one-line errors for a kubeconfig, a context or a server that cannot be used."""

from __future__ import annotations

import pytest
import yaml

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.live.cluster import connect


def test_it_connects_to_the_current_context_and_reads_the_server_version(control_plane):
    cluster = connect(kubeconfig=str(control_plane.kubeconfig))

    assert (cluster.context, cluster.server) == ("local", control_plane.server)
    assert cluster.version.startswith("v1.")


def test_the_crds_the_tests_need_are_served(control_plane):
    from kubernetes import client

    cluster = connect(kubeconfig=str(control_plane.kubeconfig))
    served = {c.spec.names.kind for c in client.ApiextensionsV1Api(cluster.api).list_custom_resource_definition().items}

    assert {"MPIJob", "Kustomization", "GitRepository", "ClusterQueue", "LocalQueue", "HelmRelease"} <= served


def kubeconfig_with(control_plane, tmp_path, **changes) -> str:
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for key, value in changes.items():
        if key == "server":
            config["clusters"][0]["cluster"]["server"] = value
        elif key == "token":
            config["users"][0]["user"]["token"] = value
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_an_unknown_context_is_one_line_naming_the_known_ones(control_plane):
    with pytest.raises(InputError) as raised:
        connect(context="prod", kubeconfig=str(control_plane.kubeconfig))

    assert str(raised.value) == f"unknown context 'prod' in {control_plane.kubeconfig}; known: local"


def test_a_missing_kubeconfig_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"^no usable kubeconfig at .*/absent: "):
        connect(kubeconfig=str(tmp_path / "absent"))


def test_an_unreachable_server_is_one_line(control_plane, tmp_path):
    config = kubeconfig_with(control_plane, tmp_path, server="https://127.0.0.1:1")

    with pytest.raises(InputError) as raised:
        connect(kubeconfig=config)

    message = str(raised.value)
    assert message.startswith("cannot reach the API server at https://127.0.0.1:1 (context 'local'): ")
    assert "\n" not in message


def test_refused_credentials_are_one_line_without_the_token(control_plane, tmp_path):
    config = kubeconfig_with(control_plane, tmp_path, token="not-the-token-0123456789")

    with pytest.raises(InputError) as raised:
        connect(kubeconfig=config)

    assert str(raised.value) == f"the API server at {control_plane.server} (context 'local') answered 401 Unauthorized"
    assert "0123456789" not in str(raised.value)
