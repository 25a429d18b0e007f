"""Hostile pull-request content, by class (the threat model is in docs/validate-and-diff.md, "What a pull request
controls"). Every case asserts the output: the exit status, the one line said, nothing written outside the output
folder, no source changed, no content of a file outside the repository shown, no workflow command or markup.

Classes covered here: escape and data loss (names that become file names, reads outside the repository, an
output folder that holds a person's files) and injection into CI logs and the pull-request comment.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from test_cli import environment, tool

from eks_gpu_gitops.core.escaping import code_span, command_data, in_markdown, neutralise_commands, one_line

SECRET = "outside-s3cr3t-4b9e"


def last_line(result: subprocess.CompletedProcess, verb: str, code: int = 2) -> str:
    """The line a failed verb ends with (after its progress lines), with no traceback."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{verb}: "), line
    return line.removeprefix(f"{verb}: ")


def add_kustomization(repo: Path, name, path: str = "./overlays/prod/training", **spec) -> None:
    doc = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "path": path,
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }
    (repo / "clusters/prod/hostile.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


# --- escape and data loss: a name becomes a file name only inside the output folder -------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "../../../../tmp/hostile-x",
        "../../overlays/base/training/mpijob",
        "..",
        "a/b",
        "a\\b",
        "x\n::error::y",
        ".hidden",
    ],
)
def test_a_kustomization_name_that_is_no_file_name_is_refused_and_nothing_is_written(repo, tmp_path, name):
    add_kustomization(repo, name)
    source = (repo / "overlays/base/training/mpijob.yaml").read_bytes()
    out = tmp_path / "out" / "rendered"
    said = last_line(tool(repo, "render", "--out", str(out)), "render")
    assert said.startswith("prod: Flux Kustomization ") and "cannot be a file name" in said, said
    assert "\n" not in said and "::error" not in said.split("'")[0]
    assert not out.exists() and not Path("/tmp/hostile-x.yaml").exists()
    assert (repo / "overlays/base/training/mpijob.yaml").read_bytes() == source
    assert [p.name for p in (tmp_path / "out").iterdir()] == []  # no staging folder left behind


def test_two_outputs_of_one_name_are_refused(repo, tmp_path):
    add_kustomization(repo, "eksctl")  # would overwrite the eksctl overlay's eksctl.yaml
    said = last_line(tool(repo, "render", "--out", str(tmp_path / "out")), "render")
    assert said == "prod: two outputs would be written to eksctl.yaml; rename one"
    assert not (tmp_path / "out").exists()


def test_an_output_folder_keeps_its_mode(repo, tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o750)
    os.chmod(out, 0o750)
    assert tool(repo, "render", "--out", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert tool(repo, "render", "--out", str(out)).returncode == 0  # replaced by the next render: still 0750
    assert stat.S_IMODE(out.stat().st_mode) == 0o750


def _outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text(f"password={SECRET}\n")
    return secret


@pytest.mark.parametrize(
    "files",
    [
        # a generator config file naming a file outside
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ngenerators: [gen.yaml]\n",
            "gen.yaml": f"apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: leak\nfiles: [{outside}]\n",
        },
        # an inline generator
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ngenerators:\n- |-\n  apiVersion: builtin\n"
            f"  kind: SecretGenerator\n  metadata:\n    name: leak\n  files: [{outside}]\n",
        },
        # a transformer config file whose patch is outside
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ntransformers: [t.yaml]\n",
            "t.yaml": f"apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: leak\npath: {outside}\n",
        },
        # an inline patch transformer
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ntransformers:\n- |-\n  apiVersion: builtin\n"
            f"  kind: PatchTransformer\n  metadata:\n    name: leak\n  path: {outside}\n",
        },
        # a configMapGenerator file, a plain resource, a patch: by absolute path and by ..
        lambda outside: {"kustomization.yaml": f"configMapGenerator:\n- name: leak\n  files: [{outside}]\n"},
        lambda outside: {"kustomization.yaml": f"resources: [{outside}]\n"},
        lambda outside: {"kustomization.yaml": "resources: [../../../../outside.txt]\n"},
        lambda outside: {"kustomization.yaml": f"resources: [../../base/training]\npatches:\n- path: {outside}\n"},
    ],
    ids=[
        "generator-file",
        "inline-generator",
        "transformer-file",
        "inline-transformer",
        "configmap-file",
        "resource-absolute",
        "resource-dotdot",
        "patch-file",
    ],  # fmt: skip
)
def test_no_build_reads_a_file_outside_the_repository(repo, tmp_path, files):
    outside = _outside(repo.parent)
    folder = repo / "overlays/prod/hostile"
    folder.mkdir()
    for name, text in files(outside).items():
        (folder / name).write_text(text)
    add_kustomization(repo, "hostile", "./overlays/prod/hostile")
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    said = last_line(result, "render")
    assert SECRET not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists(), said


def test_flux_components_outside_the_repository_are_refused(repo, tmp_path):
    _outside(repo.parent)
    add_kustomization(repo, "hostile", components=["../../../outside.txt"])
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    said = last_line(result, "render")
    assert "outside" in said and SECRET not in result.stdout + result.stderr


# --- injection: every human-facing output goes through one escaping -------------------------------------------


HOSTILE = [
    "x\n::error file=README.md::pwned",
    "x\r::add-mask::y",
    "  ::warning::z",
    "x ##[error]pwned",
    "##[set-output name=a]b",
    "\x1b]8;;http://evil\x07link\x1b]8;;\x07",
    "\x1b[2J\x1b[Hclear",
    "safe\u202egnp.exe",
    "zero\u2066width\u2069",
    "nul\x00byte",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_output_line_is_a_workflow_command_or_carries_control_characters(text):
    outputs = [(neutralise_commands(text), True), (one_line(text), True), (in_markdown(text), True)]
    outputs.append((command_data(text), False))  # an annotation's data: it follows `::error ...::` on its line
    for shown, starts_a_line in outputs:
        if starts_a_line:
            for line in shown.split("\n"):
                assert not line.lstrip().startswith("::"), shown
        assert "\n" not in shown or starts_a_line
        assert "##[" not in shown, shown
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", shown), shown
    assert "\n" not in one_line(text)


@pytest.mark.parametrize(
    "name",
    ["a`b ![x](http://evil/p.png) [y](http://evil) @org/team", "``</code><img src=x>", "**bold** _i_ #1 ~~s~~"],
)
def test_a_name_in_a_notice_cannot_make_markup_a_link_an_image_or_a_mention(name):
    message = f"Flux Kustomization {code_span(name)} prunes; also {name}"
    shown = in_markdown(message)
    outside = re.sub(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", "", shown)  # what is not inside a code span
    assert "](" not in outside.replace("\\](", "").replace("\\]\\(", "")
    assert "<img" not in outside and "@org" not in outside and "**" not in outside.replace("\\*\\*", "")
    assert shown.count(code_span(name)) == 1  # the name is shown whole, in its own code span


def test_progress_lines_of_a_hostile_name_are_one_line_each(repo, tmp_path):
    add_kustomization(repo, "ok", "./overlays/prod/training")
    hostile = repo / "overlays/prod/training/hostile.yaml"
    hostile.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x\n::error::pwned ##[warning]"}})
    )
    kustomization = yaml.safe_load((repo / "overlays/prod/training/kustomization.yaml").read_text())
    kustomization["resources"].append("hostile.yaml")
    (repo / "overlays/prod/training/kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = subprocess.run(
        [str(repo / "scripts" / "validate"), "--env", "prod", "--format", "github"],
        cwd=repo,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    for line in (result.stdout + result.stderr).splitlines():
        assert not line.lstrip().startswith("::") or line.startswith(
            ("::error file=", "::warning file=", "::notice")
        ), line
        assert "##[" not in line, line


# --- crashes: what Flux refuses is one line, never an internal error --------------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"images": ["x"]}, "unable to get images: unable to convert patch 0 to map[string]interface{}"),
        ({"patches": ["x"]}, "unable to get patches"),
        ({"components": [{"path": "x"}]}, "unable to get components"),
        ({"commonMetadata": {"labels": ["x"]}}, ""),
    ],
    ids=["images", "patches", "components", "commonMetadata"],
)
def test_a_spec_of_the_wrong_shape_is_one_line(repo, tmp_path, spec, says):
    add_kustomization(repo, "hostile", **spec)
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    if not says:  # Flux ignores a field it cannot read as a map: so does the render
        assert result.returncode == 0, result.stderr
        return
    said = last_line(result, "render")
    assert said.startswith("overlays/prod/training: kustomize build failed: ") and says in said, said
    assert "internal error" not in result.stderr and not (tmp_path / "out").exists()


# --- leaks: secrets known by their name and by their shape, whatever the text around them ----------------------

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
    "text", ["image: nginx:1.25", "replicas: 3", "--epochs 3", "a Bearer token", "key: app", "uses: actions/cache@v5"]
)
def test_ordinary_text_is_left_alone(text):
    from eks_gpu_gitops.core.credentials import mask_text

    assert mask_text(text) == text


# --- hangs: nothing read blocks or grows without bound ---------------------------------------------------------


@pytest.mark.parametrize("replacement", ["fifo", "dev-zero"])
def test_a_cache_entry_made_a_fifo_or_a_device_is_a_miss(repo, tmp_path, replacement):
    cache = tmp_path / "cache"
    env = environment(GITOPS_RENDER_CACHE=str(cache))
    assert tool(repo, "render", "--out", str(tmp_path / "first"), env=env).returncode == 0
    entries = sorted(cache.rglob("*.yaml"))
    assert entries
    for entry in entries:
        entry.unlink()
        if replacement == "fifo":
            os.mkfifo(entry)
        else:
            entry.symlink_to("/dev/zero")
    result = tool(repo, "render", "--out", str(tmp_path / "second"), env=env)  # timeout=600 in tool(): no hang
    assert result.returncode == 0, result.stderr
    first, second = (sorted((tmp_path / n).rglob("*.yaml")) for n in ("first", "second"))
    assert [p.read_text() for p in first] == [p.read_text() for p in second]


def test_a_fifo_in_the_repository_is_never_read(repo, tmp_path):
    folder = repo / "overlays/prod/training"
    os.mkfifo(folder / "pipe.yaml")
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    kustomization["resources"].append("pipe.yaml")
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = subprocess.run(
        [str(repo / "scripts" / "validate"), "--env", "prod", "--quiet"],
        cwd=repo,
        env=environment(GITOPS_RENDER_CACHE=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("validate: ") and "pipe.yaml" in line, line
