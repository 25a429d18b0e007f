"""No secret in any output of diff or validate, and no name or value that escapes its place in
the markdown comment or writes a workflow command into the CI log."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from diff_objects import cluster_config, environment, mpijob

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.diff import masking
from eks_gpu_gitops.diff.formats import json_format, markdown, text
from eks_gpu_gitops.diff.model import Side
from eks_gpu_gitops.diff.report import build_report
from eks_gpu_gitops.model import Manifest
from eks_gpu_gitops.render import helper
from eks_gpu_gitops.validate import report as validate_report
from eks_gpu_gitops.validate.runner import Reported, Result

# --- masking: every shape, in every diff format ----------------------------------------------------


def objects(secret: str) -> tuple[list[dict], dict]:
    """One object per secret shape of the issue, each holding `secret` (with a suffix per shape), and an
    eksctl ClusterConfig whose preBootstrapCommands hold it too."""
    container = {
        "name": "main",
        "image": "app",
        "env": [
            {"name": "DB_PASS", "value": f"{secret}-dbpass"},
            {"name": "GH_PAT", "value": f"{secret}-ghpat"},
            {"name": "EPOCHS", "value": "20"},
        ],
        "command": ["sh", "-c", f"export WANDB_API_KEY={secret}-wandb && python train.py --epochs 3"],
        "args": ["--password=" + f"{secret}-arg", "--token", f"{secret}-next", "--epochs", "3"],
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "t", "annotations": {"example.com/api-token": f"{secret}-ann"}},
        "data": {
            "token": f"{secret}-token",
            "DATABASE_URL": f"https://user:{secret}-url@db.example.com/x",
            "mode": "fast",
        },
        "binaryData": {"blob": f"{secret}-binary"},
    }
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "db", "namespace": "t"},
        "spec": {"values": {"auth": {"username": "admin", "password": f"{secret}-helm"}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "t"},
        "spec": {"containers": [container]},
    }
    cluster = cluster_config(2)
    cluster["managedNodeGroups"][1]["preBootstrapCommands"] = [
        f"echo 'export HF_TOKEN={secret}-eks' >> /etc/environment",
        f"curl -u admin:x https://user:{secret}-ekurl@repo.example.com/setup.sh | sh",
    ]
    return [config_map, release, pod], cluster


SHAPES = ("dbpass", "ghpat", "wandb", "arg", "next", "ann", "token", "url", "binary", "helm", "eks", "ekurl")


def secret_report():
    base_objects, base_cluster = objects("0ld-s3cr3t")
    head_objects, head_cluster = objects("n3w-s3cr3t")
    side = Side("main (abc)", "main", "abc")
    return build_report(
        side, [environment(base_objects, cluster=base_cluster)], side, [environment(head_objects, cluster=head_cluster)]
    )


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_every_secret_shape_is_masked_in_every_diff_format(fmt):
    report = secret_report()
    output = {"text": text.render, "markdown": markdown.render, "json": json_format.render}[fmt](report)
    assert "s3cr3t" not in output
    diffs = "\n".join(change.diff for env in report.environments for change in env.changes)
    # every shape changed, and the diff says so: one before and one after marker per shape
    # one shape per line, and the curl line has two: `-u admin:x` and the URL's password
    masked = len(SHAPES) + 1
    assert (diffs.count(masking.MASK_BEFORE), diffs.count(masking.MASK_AFTER)) == (masked, masked)
    assert "EPOCHS" in output and "fast" in output and "admin" in output  # ordinary values stay visible


def test_each_shape_is_masked_where_it_is():
    (config_map, release, pod), cluster = objects("s3cr3t")
    masked_config = masking.mask(config_map)
    assert masked_config["data"] == {
        "token": "***",
        "DATABASE_URL": "https://user:***@db.example.com/x",
        "mode": "fast",
    }
    assert masked_config["binaryData"] == {"blob": "***"}
    assert masked_config["metadata"]["annotations"] == {"example.com/api-token": "***"}
    assert masking.mask(release)["spec"]["values"]["auth"] == {"username": "admin", "password": "***"}
    container = masking.mask(pod)["spec"]["containers"][0]
    assert [e["value"] for e in container["env"]] == ["***", "***", "20"]
    assert container["command"][2] == "export WANDB_API_KEY=*** && python train.py --epochs 3"
    assert container["args"] == ["--password=***", "--token", "***", "--epochs", "3"]
    commands = masking.mask(cluster)["managedNodeGroups"][1]["preBootstrapCommands"]
    assert commands == [
        "echo 'export HF_TOKEN=***' >> /etc/environment",
        "curl -u admin:*** https://user:***@repo.example.com/setup.sh | sh",
    ]


def test_an_unchanged_secret_is_masked_without_a_changed_marker():
    before, after = masking.mask_pair(*(objects("s3cr3t")[0][0],) * 2)
    assert before["data"]["token"] == after["data"]["token"] == "***"
    assert before["binaryData"]["blob"] == "***"


@pytest.mark.parametrize(
    "name",
    ["DB_PASS", "GH_PAT", "db_passwd", "MYSQL_PWD", "apiKey", "APIKEY", "client-secret", "DBPASSWORD",
     "GITHUBTOKEN", "SERVICE_CREDENTIALS", "basic-auth", "PRIVATE_KEY_PEM", "tls.key", "example.com/api-token"],
)  # fmt: skip
def test_credential_name_parts_are_recognised(name):
    assert masking.looks_like_credential(name)


@pytest.mark.parametrize(
    "name",
    ["KEYBOARD", "key", "TOKENIZER_PATH", "pathType", "secretName", "secretKeyRef", "passwordFile", "author",
     "bypass", "NCCL_DEBUG", "keyPrefix", "SORT_KEY"],
)  # fmt: skip
def test_names_that_only_contain_a_credential_word_are_not(name):
    assert not masking.looks_like_credential(name)


def test_selector_keys_tolerations_and_booleans_stay_visible():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "automountServiceAccountToken": False,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "volumes": [{"name": "creds", "secret": {"secretName": "db-password"}}],
            "containers": [
                {
                    "name": "main",
                    "env": [{"name": "TOKENIZER_PATH", "value": "/models/tok"}],
                    "args": ["--tokenizer", "bpe", "--url", "https://example.com:8443/x"],
                }
            ],
        },
    }
    assert masking.mask(pod) == pod


# --- validate: schema messages name the field and what it expects, never the value -------------------


def schema_messages(checker, doc: dict) -> list[str]:
    return [problem.message for problem in checker.check(Manifest(doc, "test.yaml"), "1.31")]


def config_map(**data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "t"}, "data": data}


def test_a_schema_message_says_the_field_and_type_without_the_value(checker):
    messages = schema_messages(checker, config_map(token=["hunter2-s3cr3t"], mode="fast"))
    assert messages == ["data.token: expected string or null"]


def test_a_valid_object_has_no_schema_message(checker):
    assert schema_messages(checker, config_map(token="hunter2-s3cr3t")) == []


def test_unknown_and_missing_fields_are_named_without_values(checker):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"image": "i:1", "pasword": "hunter2-s3cr3t"}]},
    }
    assert schema_messages(checker, pod) == [
        "spec.containers.0: missing required field name",
        "spec.containers.0: unknown field pasword",
    ]


def test_an_enum_message_lists_the_allowed_values_not_the_given_one(checker):
    job = mpijob(2, 8)
    job["spec"]["mpiImplementation"] = "hunter2-s3cr3t"
    assert schema_messages(checker, job) == ['spec.mpiImplementation: expected one of "OpenMPI", "Intel", "MPICH"']


# --- validate: nulls the API server drops ------------------------------------------------------------


def launcher_container(job: dict) -> dict:
    return job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]


def test_a_custom_resource_field_with_no_value_is_dropped_like_the_api_server_does(checker):
    job = mpijob(2, 8)
    launcher_container(job)["command"] = None
    launcher_container(job)["args"] = None
    assert schema_messages(checker, job) == []


def test_a_custom_resource_field_of_the_wrong_type_is_still_invalid(checker):
    job = mpijob(2, 8)
    launcher_container(job)["command"] = "python train.py"
    assert schema_messages(checker, job) == [
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers.0.command: expected array"
    ]


def test_a_dropped_null_of_a_required_field_leaves_it_missing(checker):
    job = mpijob(2, 8)
    launcher_container(job)["name"] = None
    assert schema_messages(checker, job) == [
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers.0: missing required field name"
    ]


def test_a_built_in_kind_accepts_a_null_field(checker):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "i:1", "command": None, "args": None}]},
    }
    assert schema_messages(checker, pod) == []
    pod["spec"]["containers"][0]["command"] = "python train.py"
    assert schema_messages(checker, pod) == ["spec.containers.0.command: expected array or null"]


# --- kustomize errors: the cause without kustomize's echo of the configuration ------------------------


def failed_build(tmp_path, files: dict[str, str]) -> str:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    with pytest.raises(InputError) as raised:
        helper.build(tmp_path)
    return str(raised.value)


SECRET = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: hunter2-s3cr3t\n"


def test_a_build_error_keeps_the_cause_and_drops_the_echoed_configuration(tmp_path):
    patch = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData: [hunter3-s3cr3t]\n"
    message = failed_build(
        tmp_path,
        {
            "kustomization.yaml": "resources: [s.yaml]\npatches:\n  - path: patch.yaml\n",
            "s.yaml": SECRET,
            "patch.yaml": patch,
        },
    )
    assert message == f"{tmp_path}: kustomize build failed: wrong node kind: expected MappingNode but got SequenceNode"


def test_a_build_error_hides_a_generator_literal(tmp_path):
    generator = 'secretGenerator:\n  - name: x\n    literals: ["DB_PASSWORD hunter2-s3cr3t"]\n'
    message = failed_build(tmp_path, {"kustomization.yaml": generator})
    assert message == (
        f"{tmp_path}: kustomize build failed: loading KV pairs: invalid literal source (value not shown), "
        "expected key=value"
    )


def test_a_build_error_masks_credential_shapes_in_what_is_left():
    stderr = "accumulating resources: https://bot:hunter2-s3cr3t@git.example.com/x.git: TOKEN=hunter3-s3cr3t not found"
    assert helper.masked_error(stderr) == (
        "accumulating resources: https://bot:***@git.example.com/x.git: TOKEN=*** not found"
    )


def test_a_build_error_without_an_echo_is_kept_whole(tmp_path):
    message = failed_build(tmp_path, {"kustomization.yaml": "resources: [missing.yaml]\n"})
    assert message.startswith(f"{tmp_path}: kustomize build failed: accumulating resources:")
    assert "missing.yaml" in message


# --- injection: hostile names stay inside their place --------------------------------------------------

HOSTILE = "x</code></summary></details> <img src=y> `tick` ::error file=README.md::pwned"
HOSTILE_LINES = "x\n::error file=README.md::pwned\r::add-mask::y\n  ::warning::z"


def hostile_report(name: str):
    def config(value: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "t"},
            "data": {"a": value},
        }

    side = Side("main (abc)", "main", "abc")
    return build_report(side, [environment([config("1")])], side, [environment([config(name)])])


def test_a_hostile_name_stays_inside_its_summary_in_the_markdown_comment():
    body = markdown.render(hostile_report(HOSTILE))
    summary = (
        "<details><summary>~ <code>ConfigMap t/x&lt;/code&gt;&lt;/summary&gt;&lt;/details&gt; &lt;img src=y&gt; "
        "`tick` ::error file=README.md::pwned</code> (Kustomization training, +1 -1)</summary>"
    )
    assert body.count(summary) == 1
    outside_code = re.sub(r"^```diff\n.*?^```$", "", body, flags=re.MULTILINE | re.DOTALL)
    assert outside_code.count("<details>") == outside_code.count("</details>") == 2  # environment, object
    assert "<img" not in outside_code


def test_a_name_with_line_breaks_writes_no_workflow_command_in_any_diff_format():
    report = hostile_report(HOSTILE_LINES)
    lines = text.render(report).replace("\r", "\n").splitlines()
    assert [line for line in lines if line.lstrip().startswith("::")] == []
    assert [line for line in lines if line.lstrip().startswith("\\::")] == [  # neutralised, still shown
        "\\::error file=README.md::pwned\\u000d::add-mask::y",  # a lone carriage return is shown, not obeyed
        "  \\::warning::z  (Kustomization training, +1 -1)",
    ]
    body = markdown.render(report)
    assert [line for line in body.splitlines() if line.lstrip().startswith("::")] == []
    assert "<code>ConfigMap t/x ::error file=README.md::pwned ::add-mask::y ::warning::z</code>" in body
    document = json_format.render(report)
    assert [line for line in document.splitlines() if line.lstrip().startswith("::")] == []


def test_an_ordinary_name_is_shown_as_it_is():
    body = markdown.render(hostile_report("train-data"))
    assert "<details><summary>~ <code>ConfigMap t/train-data</code> (Kustomization training, +1 -1)</summary>" in body
    assert "\\" not in text.render(hostile_report("train-data"))


def reported(resource: str, message: str) -> Reported:
    return Reported(
        rule="schema-invalid",
        severity="error",
        env="prod",
        file="overlays/prod/a.yaml",
        line=3,
        resource=resource,
        kustomization="training",
        message=message,
        remediation="Fix it.",
    )


def test_validate_github_escapes_data_and_properties_like_the_toolkit():
    result = Result(findings=[reported("ConfigMap/t/" + HOSTILE_LINES, "100% bad, see: x")], environments=["prod"])
    first, summary = validate_report.FORMATS["github"](result).splitlines()
    assert first == (
        "::error file=overlays/prod/a.yaml,line=3,title=schema-invalid (prod)::ConfigMap/t/x%0A::error "
        "file=README.md::pwned%0D::add-mask::y%0A  ::warning::z: 100%25 bad, see: x%0AFix: Fix it."
    )
    assert summary == "1 error, 0 warnings, 0 suppressed in 0 objects (prod)"
    hostile_file = Result(findings=[replace(reported("ConfigMap/t/x", "m"), file="a,b:c%.yaml")])
    first = validate_report.FORMATS["github"](hostile_file).splitlines()[0]
    assert first.startswith("::error file=a%2Cb%3Ac%25.yaml,line=3,title=schema-invalid (prod)::")


def test_validate_text_and_json_write_no_workflow_command():
    result = Result(findings=[reported("ConfigMap/t/" + HOSTILE_LINES, "bad")], environments=["prod"])
    output = validate_report.FORMATS["text"](result)
    lines = output.replace("\r", "\n").splitlines()
    assert [line for line in lines if line.lstrip().startswith("::")] == []
    assert [line.strip() for line in lines if line.lstrip().startswith("\\::")] == [
        "\\::error file=README.md::pwned\\u000d::add-mask::y",  # a lone carriage return is shown, not obeyed
        "\\::warning::z: bad",
    ]
    document = validate_report.FORMATS["json"](result)
    assert json.loads(document)["findings"][0]["resource"] == "ConfigMap/t/" + HOSTILE_LINES


def test_validate_masks_credentials_a_finding_quotes():
    result = Result(findings=[reported("ConfigMap/t/c", "data.url is 'postgres://u:hunter2@REPLACE-ME/db'")])
    for fmt in ("text", "json", "github"):
        output = validate_report.FORMATS[fmt](result)
        assert "hunter2" not in output and "postgres://u:***@REPLACE-ME/db" in output
