"""Hostile input, leaks: secrets known by their name and by their shape, whatever the text around them; a Secret's
value in a rule's message, a value substituted from a Secret in a finding's name, a Secret nested in HelmRelease
values, kustomize's echo of the configuration it failed on, and a cluster's answer or a kubeconfig's URL: none
shows in any output (stdout, stderr, a written comment), errors included."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from hostile import add_kustomization, last_line
from test_cli import environment, tool

LEAKS = [
    ("Authorization: Bearer tok3n-AbC123xyz", "tok3n-AbC123xyz"),
    ("curl -H 'Authorization: Basic dXNlcjpodW50ZXIy' https://x", "dXNlcjpodW50ZXIy"),
    ("TOKEN=first|second-half", "second-half"),
    ('PASSWORD="ab\\"cd-second" next', "cd-second"),
    ("PASSWORD=abc\\\nsecond-line", "second-line"),
    ('{"password": "hunter2-json", "user": "x"}', "hunter2-json"),
    ("[db]\npassword = hunter2-ini\nuser = x", "hunter2-ini"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA-pem\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA-pem"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SflKxwRJSMeKKF2QT4fw", "eyJzdWIiOiIxIn0"),
    ("machine git.example.com login bot password hunter2-netrc", "hunter2-netrc"),
    ("machine git.example.com\n  login bot\n  password hunter2-netrc-lines\n", "hunter2-netrc-lines"),
    ("curl -u bob:hunter2-curl https://x", "hunter2-curl"),
    ("echo hunter2-stdin | docker login -u x --password-stdin ghcr.io", "hunter2-stdin"),
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI-aws && aws configure set region us-west-2", "FEMI-aws"),
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("key id AKIAIOSFODNN7EXAMPLE in a sentence", "AKIAIOSFODNN7EXAMPLE"),
]


@pytest.mark.parametrize(("text", "secret"), LEAKS, ids=[f"leak-{i}" for i in range(len(LEAKS))])
def test_a_secret_is_masked_by_its_name_or_its_shape(text, secret):
    from eks_gpu_gitops.core.credentials import mask_text

    masked = mask_text(text)
    assert secret not in masked and "***" in masked, masked


@pytest.mark.parametrize(
    "text",
    [
        "image: nginx:1.25",
        "replicas: 3",
        "--epochs 3",
        "a Bearer token",
        "key: app",
        "uses: actions/cache@v5",
        "kind: Secret",  # a Secret named, none held
        "kind: Secret, secretName: db-password",
        "trouble configuring builtin PatchTransformer (its configuration not shown): patch and path can't be set",
        "the API server at https://127.0.0.1:6443 (context 'local') answered 403 Forbidden",
        "registry:5000/team/image@sha256:0123abcd",
        "the password is wrong",  # netrc's `password x` only after its login or at the start of a line
        "stringData.password holds a placeholder (a secret value, not shown)",
    ],
)
def test_ordinary_text_is_left_alone(text):
    from eks_gpu_gitops.core.credentials import mask_text

    assert mask_text(text) == text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://admin:hunter2-url@k8s.example.com:6443", "https://k8s.example.com:6443"),
        ("https://ghp_tok3nAsUser@github.com/team/repo.git", "https://github.com/team/repo.git"),
        ("http://:hunter2-empty-user@127.0.0.1:8080/api", "http://127.0.0.1:8080/api"),
        ("https://k8s.example.com:6443", "https://k8s.example.com:6443"),
        ("https://registry:5000/v2/image@sha256:abc", "https://registry:5000/v2/image@sha256:abc"),
        ("git@github.com:team/repo.git", "git@github.com:team/repo.git"),
    ],
)
def test_a_url_is_shown_without_its_userinfo_and_nothing_else_changes(url, shown):
    from eks_gpu_gitops.core.credentials import without_userinfo

    assert without_userinfo(url) == shown


# --- 1. a rule's message never echoes a secret's value ------------------------------------------------------

SECRET_VALUE = "REPLACE-ME-hunter2-rule-7c41"  # a placeholder, so placeholder-value reports the field holding it


def _secret_with_placeholders() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "training"},
        "stringData": {"password": SECRET_VALUE, "url": f"postgres://app:{SECRET_VALUE}@db:5432/app"},
    }


def _release_with_placeholders() -> dict:
    """A HelmRelease whose values hold secrets the ways charts take them: a whole Secret manifest under
    extraObjects, a Secret template as a string, a credential-named key at depth, a Secret-like map of values."""
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "hostile-db", "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "chart": {
                "spec": {
                    "chart": "aws-fsx-csi-driver",
                    "version": "1.0.0",
                    "sourceRef": {"kind": "HelmRepository", "name": "aws-fsx-csi-driver"},
                }
            },
            "values": {
                "replicaCount": 2,
                "image": {"repository": "postgres", "tag": "16.4"},
                "auth": {"username": "admin", "rootPassword": f"{SECRET_VALUE}-root"},
                "extraObjects": [
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": "extra"},
                        "stringData": {"apiUrl": f"{SECRET_VALUE}-extra"},
                        "data": {"blob": base64.b64encode(f"{SECRET_VALUE}-b64".encode()).decode()},
                    }
                ],
                "extraDeploy": f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: t\nstringData:\n"
                f"  endpoint: {SECRET_VALUE}-template\n",
                "extraJson": json.dumps({"kind": "Secret", "data": {"x": f"{SECRET_VALUE}-json"}}),
                "secrets": {"tracker": {"data": {"endpoint": f"{SECRET_VALUE}-map"}}},
                "config": {"nested": {"deeper": {"stringData": {"anything": f"{SECRET_VALUE}-deep"}}}},
            },
        },
    }


def _add_resources(repo: Path, folder: str, name: str, docs: list[dict]) -> None:
    (repo / folder / name).write_text(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    kustomization = repo / folder / "kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    config["resources"].append(name)
    kustomization.write_text("---\n" + yaml.safe_dump(config, sort_keys=False))


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_a_placeholder_in_a_secret_names_the_field_never_the_value(repo, fmt):
    _add_resources(repo, "overlays/dev/training", "hostile-secret.yaml", [_secret_with_placeholders()])
    _add_resources(repo, "overlays/dev/infrastructure", "hostile-release.yaml", [_release_with_placeholders()])

    result = tool(repo, "validate", "--env", "dev", "--format", fmt, "--strict")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    out = result.stdout if fmt != "json" else json.dumps(json.loads(result.stdout))
    for field in (
        "stringData.password",
        "stringData.url",
        "spec.values.auth.rootPassword",
        "spec.values.extraObjects.0.stringData.apiUrl",
        "spec.values.extraDeploy",
        "spec.values.extraJson",
        "spec.values.secrets.tracker.data.endpoint",
        "spec.values.config.nested.deeper.stringData.anything",
    ):
        assert f"{field} holds a placeholder (a secret value, not shown)" in out, (field, out)


def test_a_placeholder_in_an_ordinary_value_is_still_quoted(repo):
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "plain", "namespace": "training"},
        "data": {"bucket": "s3://REPLACE-ME/data", "script": "export TOKEN=REPLACE-ME-hunter2-env && run"},
    }
    _add_resources(repo, "overlays/dev/training", "hostile-config.yaml", [config_map])

    result = tool(repo, "validate", "--env", "dev", "--format", "json")

    assert result.returncode == 0, result.stdout + result.stderr
    messages = {
        f["path"]: f["message"] for f in json.loads(result.stdout)["findings"] if f["rule"] == "placeholder-value"
    }
    assert messages["data.bucket"] == "data.bucket is 's3://REPLACE-ME/data' (placeholder 'REPLACE-ME')"
    assert (
        messages["data.script"]
        == "data.script is 'export TOKEN=*** && run' (a placeholder in a secret value, not shown)"
    )
    assert "hunter2" not in result.stdout + result.stderr


# --- 2. a value substituted from a Secret, in a finding's resource, message and reason -----------------------

SUBSTITUTED = "Hunter2SubstTok3n"  # upper case: a name made of it is no DNS name, so object-name-invalid quotes it


def _substitute_from_a_secret(repo: Path) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "run-secrets", "namespace": "flux-system"},
        "data": {"TOKEN": base64.b64encode(SUBSTITUTED.encode()).decode()},
    }
    _add_resources(repo, "overlays/dev/infrastructure", "hostile-sources.yaml", [secret])
    objects = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg-${TOKEN}
  namespace: training
data:
  mode: fast
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: suppressed-${TOKEN}
  namespace: training
  annotations:
    validate.gitops/ignore-object-name-invalid: "named after ${TOKEN} on purpose"
data:
  mode: fast
"""
    (repo / "overlays/dev/training/hostile-substituted.yaml").write_text(objects)  # as text: ${TOKEN} stays
    kustomization = repo / "overlays/dev/training/kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    config["resources"].append("hostile-substituted.yaml")
    kustomization.write_text("---\n" + yaml.safe_dump(config, sort_keys=False))
    entry = repo / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["spec"]["postBuild"] = {"substituteFrom": [{"kind": "Secret", "name": "run-secrets"}]}
    entry.write_text("---\n" + yaml.safe_dump(doc, sort_keys=False))


def test_a_substituted_secret_in_a_name_is_masked_in_every_validate_format_cached_or_not(repo):
    _substitute_from_a_secret(repo)
    outputs = {}
    for fmt in ("text", "json", "github", "text"):  # the second text run reads the results cache
        result = tool(repo, "validate", "--env", "dev", "--format", fmt)
        assert result.returncode == 1, result.stdout + result.stderr
        assert SUBSTITUTED not in result.stdout + result.stderr, result.stdout
        outputs[fmt] = result
    assert "results of 1 unchanged environment from the cache" in outputs["text"].stderr
    text = outputs["text"].stdout
    assert "ConfigMap/training/cfg-***: ConfigMap name 'cfg-***' is not a DNS-1123 subdomain" in text
    assert "object-name-invalid ConfigMap/training/suppressed-***: named after *** on purpose" in text
    findings = json.loads(outputs["json"].stdout)
    assert {f["resource"] for f in findings["findings"] if f["rule"] == "object-name-invalid"} == {
        "ConfigMap/training/cfg-***"
    }
    assert (
        "title=object-name-invalid (dev)::ConfigMap/training/cfg-***: ConfigMap name 'cfg-***'"
        in outputs["github"].stdout
    )


def test_a_substituted_secret_in_a_name_is_masked_in_the_diff_and_its_comment(repo, tmp_path):
    _substitute_from_a_secret(repo)
    comment = tmp_path / "comment.md"

    result = tool(repo, "diff", "--base", "main", "--env", "dev", "--markdown-output", str(comment))

    assert result.returncode == 0, result.stderr
    assert "cfg-***" in comment.read_text()
    assert SUBSTITUTED not in result.stdout + result.stderr + comment.read_text()


# --- 3. a Secret nested in HelmRelease values, in the diff -----------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_a_secret_nested_in_helm_values_is_masked_in_every_diff_format(repo, fmt):
    _add_resources(repo, "overlays/dev/infrastructure", "hostile-release.yaml", [_release_with_placeholders()])

    result = tool(repo, "diff", "--base", "main", "--env", "dev", "--format", fmt)

    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert base64.b64encode(f"{SECRET_VALUE}-b64".encode()).decode() not in result.stdout
    assert "hostile-db" in result.stdout and "postgres" in result.stdout and "admin" in result.stdout


@pytest.mark.parametrize(
    ("values", "visible"),
    [
        ({"extraObjects": [{"kind": "Secret", "data": {"k": "hunter2-a"}}]}, "Secret"),
        ({"items": [{"apiVersion": "v1", "kind": "Secret", "stringData": {"k": "hunter2-b"}}]}, "v1"),
        ({"extraSecrets": {"x": {"data": {"k": "hunter2-c"}}}}, "extraSecrets"),
        ({"deep": {"a": {"b": {"c": {"db": {"password": "hunter2-d"}}}}}}, "deep"),
        ({"deep": [{"name": "X_API_KEY", "value": "hunter2-e"}]}, "X_API_KEY"),
        ({"tpl": "{{- if .Values.x }}\nkind: Secret\ndata:\n  k: aHVudGVyMi1m\n{{- end }}"}, "tpl"),
        ({"conf": {"binaryData": {"k": "hunter2-g"}}}, "conf"),
        ({"tokens": ["hunter2-h", "hunter2-i"]}, "tokens"),
    ],
    ids=["extraObjects", "list-items", "credential-key-data", "deep-key", "env-pair", "template", "binary", "list"],
)
def test_a_secret_shape_at_any_depth_is_masked_and_the_rest_is_not(values, visible):
    from eks_gpu_gitops.diff import masking

    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "r"}}
    release["spec"] = {"values": {**values, "replicaCount": 2}}
    before = yaml.safe_dump(masking.mask(release))
    changed = json.loads(json.dumps(release).replace("hunter2", "hunter3").replace("aHVudGVyMi1m", "aHVudGVyMy1m"))
    shown = "".join(yaml.safe_dump(side) for side in masking.mask_pair(release, changed))

    for text in (before, shown):
        assert "hunter" not in text and "aHVudGVy" not in text, text
        assert visible in text and "replicaCount: 2" in text
    assert masking.MASK_BEFORE in shown and masking.MASK_AFTER in shown


def test_ordinary_helm_values_and_schemas_are_left_alone():
    from eks_gpu_gitops.diff import masking

    schema = {"type": "object", "properties": {"stringData": {"type": "object"}, "data": {"type": "string"}}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]},
    }
    assert masking.mask(crd) == crd

    values = {
        "image": {"repository": "postgres", "tag": "16.4"},
        "serviceAccount": {"name": "db"},
        "auth": {"username": "admin", "existingSecretName": "db-credentials"},
        "volumes": [{"name": "creds", "secret": {"secretName": "db-password"}}],
        "config": {"data": {"mode": "fast"}, "kind": "ConfigMap"},
        "notes": "the chart reads kind: Secret objects named in auth",
    }
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "spec": {"values": values}}
    assert masking.mask(release) == release


# --- 4. kustomize's echo of the configuration it failed on ---------------------------------------------------

ECHOED = "hunter2-echo-5e0b"


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            "trouble configuring builtin PatchTransformer with config: `\npatch: |\n  stringData: {password: "
            f"{ECHOED}}}\npath: p.yaml\n`: patch and path can't be set at the same time\npatch: |\n  stringData: "
            f"{{password: {ECHOED}}}\npath: p.yaml\n",
            "trouble configuring builtin PatchTransformer (its configuration not shown): patch and path can't be set "
            "at the same time",
        ),
        (
            f'trouble configuring builtin PatchTransformer with config: `\npatch: \'{{"data":{{"x":"{ECHOED}"}}\'\n`: '
            f'unable to parse SM or JSON patch from [patch: "{{\\"data\\":{{\\"x\\":\\"{ECHOED}\\"}}"]',
            "trouble configuring builtin PatchTransformer (its configuration not shown): unable to parse SM or JSON "
            "patch",
        ),
        (  # the secret tries to end the echo early with kustomize's own "`: "
            f"trouble configuring builtin ReplacementTransformer with config: `\nx: '{ECHOED}`: {ECHOED}'\n`: boom",
            "trouble configuring builtin ReplacementTransformer (its configuration not shown)",
        ),
        (f'accumulating resources: with config: {{"data":{{"password":"{ECHOED}"}}}}', "accumulating resources: "
         "(its configuration not shown)"),  # fmt: skip
        (
            f"loading KV pairs: literal sources [TOKEN={ECHOED} PW\n{ECHOED}]: invalid literal source PW\n{ECHOED}, "
            "expected key=value",
            "loading KV pairs: invalid literal source (value not shown), expected key=value",
        ),
        (
            f"loading KV pairs: literal sources [A]: invalid literal source , expected key=value {ECHOED}]: invalid "
            f"literal source {ECHOED}, expected key=value",
            "loading KV pairs: invalid literal source (value not shown), expected key=value",
        ),
        (f"wrong node kind: node contents:\npassword: {ECHOED}\n", "wrong node kind"),
        (f"line 3 has invalid utf8 bytes : {ECHOED}\nmore {ECHOED}", "line 3 has invalid utf8 bytes"),
    ],
    ids=["patch-and-path", "json-patch", "early-end", "json-config", "literal-newline", "literal-brackets",
         "node-contents", "env-file"],
)  # fmt: skip
def test_kustomize_s_echo_is_cut_from_its_marker(error, said):
    from eks_gpu_gitops.render import helper

    assert helper.masked_error(error) == said


def _break_with_an_echo(repo: Path) -> None:
    """A Flux Kustomization whose patch kustomize cannot read: its error repeats the patch (and a Secret in it)."""
    patch = json.dumps({"apiVersion": "v1", "kind": "Secret", "stringData": {"password": ECHOED}})[:-1]
    add_kustomization(repo, "hostile", patches=[{"patch": patch, "target": {"kind": "Secret"}}])


def test_kustomize_s_echo_is_cut_in_render_s_line(repo, tmp_path):
    _break_with_an_echo(repo)
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    said = last_line(result, "render")
    assert said == (
        "overlays/prod/training: kustomize build failed: trouble configuring builtin PatchTransformer (its "
        "configuration not shown): unable to parse SM or JSON patch"
    )
    assert ECHOED not in result.stdout + result.stderr and not (tmp_path / "out").exists()


def test_kustomize_s_echo_is_cut_in_validate(repo):
    _break_with_an_echo(repo)
    result = tool(repo, "validate", "--env", "prod", "--format", "github")  # as the CI workflow runs it
    assert last_line(result, "validate") == (
        "overlays/prod/training: kustomize build failed: trouble configuring builtin PatchTransformer (its "
        "configuration not shown): unable to parse SM or JSON patch"
    )
    assert ECHOED not in result.stdout + result.stderr


def test_kustomize_s_echo_is_cut_in_diff_s_comment(repo, tmp_path):
    literals = {"secretGenerator": [{"name": "x", "literals": [f"TOKEN={ECHOED}", f"PW\n{ECHOED}"]}]}
    kustomization = repo / "overlays/dev/training/kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    kustomization.write_text(yaml.safe_dump({**config, **literals}, sort_keys=False))
    comment = tmp_path / "comment.md"

    result = tool(repo, "diff", "--base", "main", "--markdown-output", str(comment), "--format", "json")

    assert result.returncode == 2, result.stderr
    [line] = [e for e in result.stderr.splitlines() if "does not render" in e]
    assert line == (
        "diff: working tree does not render: overlays/dev/training: kustomize build failed: loading KV pairs: "
        "invalid literal source (value not shown), expected key=value (environment dev; its diff is left out)"
    )
    assert ECHOED not in result.stdout + result.stderr + comment.read_text()
    assert "invalid literal source (value not shown)" in comment.read_text()


# --- 5. the live verbs: a cluster's refusal and a kubeconfig's URL ---------------------------------------------

PASSWORD = "hunter2-kubeconfig-pw"
ANSWERED = "hunter2-in-the-answer"
TOKEN = "hunter2-bearer-token-0123"
VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.4",
    "gitCommit": "x",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _answering(refuse_version: bool, status: int):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.startswith("/version") and not refuse_version:
                body, code, kind = json.dumps(VERSION).encode(), 200, "application/json"
            else:
                body = f"denied: the token {ANSWERED} may not {self.path}\nline two {ANSWERED}".encode()
                code, kind = status, "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("X-Echo", f"Bearer {ANSWERED}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PATCH = do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    return Handler


@pytest.fixture
def refusing_server(request):
    """A loopback HTTP API server that answers /version (unless told to refuse it) and refuses everything else."""
    refuse_version, status = getattr(request, "param", (False, 403))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _answering(refuse_version, status))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _kubeconfig(tmp_path: Path, host: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://admin:{PASSWORD}@{host}"}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "hostile", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "hostile",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _no_leak(result) -> None:
    said = result.stdout + result.stderr
    for secret in (PASSWORD, ANSWERED, TOKEN, "admin:", "HTTP response", "Traceback", "internal error"):
        assert secret not in said, said


LIVE_VERBS = [
    ("status", ("--env", "dev"), " (context 'hostile')"),  # the checks ask with the context's client
    ("diff", ("--live", "--env", "dev"), ""),  # the dry run asks with the client alone
    ("validate", ("--server", "--env", "dev"), ""),
]


@pytest.mark.parametrize(("verb", "args", "context"), LIVE_VERBS, ids=[verb for verb, _, _ in LIVE_VERBS])
def test_a_refusal_after_the_probe_is_one_line_naming_status_and_reason(
    repo, tmp_path, refusing_server, verb, args, context
):
    env = environment(KUBECONFIG=str(_kubeconfig(tmp_path, refusing_server)))
    result = tool(repo, verb, *args, env=env)
    assert last_line(result, verb) == f"the API server at http://{refusing_server}{context} answered 403 Forbidden"
    _no_leak(result)


@pytest.mark.parametrize("refusing_server", [(True, 401), (True, 403)], indirect=True, ids=["401", "403"])
def test_a_refused_probe_is_one_line_without_the_url_s_password(repo, tmp_path, refusing_server):
    env = environment(KUBECONFIG=str(_kubeconfig(tmp_path, refusing_server)))
    result = tool(repo, "status", "--env", "dev", env=env)
    said = last_line(result, "status")
    assert said.startswith(f"the API server at http://{refusing_server} (context 'hostile') answered 40"), said
    _no_leak(result)


def test_an_unreachable_server_is_one_line_without_the_url_s_password(repo, tmp_path):
    env = environment(KUBECONFIG=str(_kubeconfig(tmp_path, "127.0.0.1:1")))
    result = tool(repo, "diff", "--live", "--env", "dev", env=env)
    said = last_line(result, "diff")
    assert said.startswith("cannot reach the API server at http://127.0.0.1:1 (context 'hostile'): "), said
    _no_leak(result)


def test_api_errors_of_every_kind_are_one_masked_line():
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic.exceptions import api_exception
    from urllib3.exceptions import MaxRetryError, NewConnectionError

    from eks_gpu_gitops.core.errors import InputError
    from eks_gpu_gitops.live.cluster import cluster_errors, server_of

    class Api:
        def __init__(self, host):
            self.configuration = type("Configuration", (), {"host": host})

    refused = ApiException(status=403, reason=f"Forbidden Bearer {ANSWERED}")
    refused.body, refused.headers = f"body {ANSWERED}", {"X-Echo": ANSWERED}
    unreachable = MaxRetryError(None, f"/api?token={ANSWERED}", NewConnectionError(None, f"refused: TOKEN={ANSWERED}"))
    tls = ApiException(status=0, reason=f"SSLError: password={ANSWERED}\n{ANSWERED}")
    expected = [
        "the API server at https://h answered 403 Forbidden Bearer ***",
        "the API server at https://h answered 403 Forbidden Bearer ***",
        "cannot reach the API server at https://h: None: refused: TOKEN=***",
        "cannot reach the API server at https://h: SSLError: password=***",
    ]
    for error, line in zip((refused, api_exception(refused), unreachable, tls), expected, strict=True):
        with pytest.raises(InputError) as raised, cluster_errors(server_of(Api(f"https://admin:{PASSWORD}@h"))):
            raise error
        assert str(raised.value) == line


def _fake(tmp_path: Path, name: str, script: str) -> None:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys, json\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("failing_kubectl", [False, True], ids=["other-cluster", "kubectl-fails"])
def test_cluster_settings_shows_the_server_without_its_userinfo(repo, tmp_path, failing_kubectl):
    endpoint = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
    vpc = {"subnetIds": ["subnet-0a1b2c3d4e5f60718"], "clusterSecurityGroupId": "sg-0123456789abcdef0"}
    answer = {"cluster": {"endpoint": endpoint, "resourcesVpcConfig": vpc}}
    _fake(tmp_path, "aws", f"print(json.dumps({answer!r}))")
    if failing_kubectl:
        line = f'error: Get "https://admin:{PASSWORD}@other.example.com/api": token={TOKEN} refused'
        _fake(tmp_path, "kubectl", f"print({line!r}, file=sys.stderr); sys.exit(1)")
    else:
        _fake(tmp_path, "kubectl", f'print("https://admin:{PASSWORD}@other.example.com", end="")')
    env = environment(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    args = ("--env", "prod", "--subnet-id", "subnet-0a1b2c3d4e5f60718", "--security-group-id", "sg-0123456789abcdef0")

    result = tool(repo, "cluster-settings", *args, env=env)

    said = last_line(result, "cluster-settings")
    if failing_kubectl:
        assert said == 'kubectl config: error: Get "https://other.example.com/api": token=*** refused'
    else:
        assert said.startswith("the current context points at https://other.example.com, not cluster "), said
    _no_leak(result)
