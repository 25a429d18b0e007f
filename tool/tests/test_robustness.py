"""Robustness of the tools against hostile or unusual input and against each other (issue 10, point 7):
YAML alias bombs, `kind: List`, concurrent runs, `render --out`, interrupted generators, a broken
environment in a diff."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import git
from test_cli import environment, one_line, tool, untouched, wait_for

from eks_gpu_gitops.core import yaml_limits
from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.core.yaml_file import load_mapping
from eks_gpu_gitops.diff import gitrefs
from eks_gpu_gitops.generate.files import write_all
from eks_gpu_gitops.model import Manifest, parse_stream, read_file
from eks_gpu_gitops.render.helper import HELPER  # noqa: E402
from eks_gpu_gitops.render.locate import Locator


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    """The "billion laughs": each level repeats the one before `width` times, width**levels strings."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: lol", "l0: &l0 [lol]"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    lines.append(f"data: {{k: *l{levels}}}")
    return "\n".join(lines) + "\n"


ANCHORED = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: anchored
  labels: &labels {app: trainer, tier: gpu}
  annotations:
    copied: &value same
data:
  a: *value
  b: *value
---
apiVersion: v1
kind: Service
metadata:
  name: svc
  labels: &labels {app: trainer, tier: gpu}
spec:
  selector: *labels
"""


# --- YAML alias bombs -------------------------------------------------------------------------------------


def test_an_alias_bomb_is_refused_in_one_line_before_it_is_expanded():
    started = time.monotonic()
    with pytest.raises(InputError) as refused:
        parse_stream(alias_bomb(), "clusters/dev/lol.yaml")
    message = str(refused.value)
    assert message == (
        "clusters/dev/lol.yaml: its aliases expand to more than 1,000,000 nodes (an alias bomb?); refused"
    )
    assert time.monotonic() - started < 5


def test_a_recursive_alias_is_refused():
    with pytest.raises(InputError, match=r"^x.yaml: an alias refers to the node that contains it"):
        parse_stream("apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: a, again: *m}\n", "x.yaml")


def test_yaml_with_a_few_anchors_still_loads():
    manifests = parse_stream(ANCHORED, "anchored.yaml")
    assert [m.resource for m in manifests] == ["ConfigMap/anchored", "Service/svc"]
    assert manifests[0].doc["data"] == {"a": "same", "b": "same"}
    assert manifests[1].doc["spec"]["selector"] == {"app": "trainer", "tier": "gpu"}
    # Below the limit, however many aliases: 10**5 expanded strings.
    assert len(yaml.safe_dump(parse_stream(alias_bomb(levels=5), "x.yaml")[0].doc)) > 0


def test_every_loader_of_repository_yaml_refuses_an_alias_bomb(tmp_path):
    bomb = tmp_path / "kustomization.yaml"
    bomb.write_text(alias_bomb())
    with pytest.raises(InputError, match=r"kustomization.yaml: its aliases expand to more than"):
        read_file(bomb, tmp_path)
    with pytest.raises(InputError, match=r"kustomization.yaml: invalid YAML: its aliases expand to more than"):
        load_mapping(bomb)
    for load in (yaml_limits.load, yaml_limits.load_all, yaml_limits.compose_all):
        with pytest.raises(yaml_limits.AliasLimitError):
            load(bomb.read_text())
    # locate gives up on the file (no line) instead of reading it.
    manifest = Manifest(doc={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lol"}}, file=bomb.name)
    assert Locator(tmp_path).locate(manifest, ("data", "k")) == ("kustomization.yaml", 0)
    bomb.write_text(ANCHORED.replace("name: anchored", "name: lol"))
    assert Locator(tmp_path).locate(manifest, ("data", "b")) == ("kustomization.yaml", 11)


def test_validate_refuses_an_alias_bomb_in_one_line(repo, tmp_path):
    bomb = tmp_path / "lol.yaml"
    bomb.write_text(alias_bomb())
    line = one_line(tool(repo, "validate", "--quiet", str(bomb)), "validate")
    assert line == f"{bomb}: its aliases expand to more than 1,000,000 nodes (an alias bomb?); refused"


def test_an_alias_bomb_in_an_overlay_is_refused_before_kustomize_reads_it(repo):
    # kustomize expands aliases itself: given this file it grows to about 24 GB before failing.
    training = repo / "overlays" / "prod" / "training"
    (training / "lol.yaml").write_text(alias_bomb().replace("  name: lol", "  name: lol\n  namespace: training"))
    kustomization = training / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text().replace("  - ../settings.yaml\n", "  - ../settings.yaml\n  - lol.yaml\n")
    )
    assert "lol.yaml" in kustomization.read_text()
    expected = (
        "overlays/prod/training/lol.yaml: its aliases expand to more than 1,000,000 nodes (an alias bomb?); refused"
    )
    result = tool(repo, "render", "--env", "prod")
    # Builds that finished first may have printed their progress lines; the error is the last line.
    errors = [line for line in result.stderr.strip().splitlines() if " objects" not in line]
    assert (result.returncode, errors) == (2, [f"render: {expected}"]), result.stderr

    # The other environment's diff is still shown; prod is reported broken, by that one line.
    (repo / "overlays" / "dev" / "settings.yaml").write_text(
        (repo / "overlays" / "dev" / "settings.yaml").read_text().replace("- us-west-2b\n", "- us-west-2c\n", 1)
    )
    result = tool(repo, "diff", "--base", "main", "--format", "json")
    assert result.returncode == 2
    assert [(env["name"], env["status"]) for env in json.loads(result.stdout)["environments"]] == [("dev", "changed")]
    assert expected in result.stderr and "(environment prod; its diff is left out)" in result.stderr


# --- kind: List ----------------------------------------------------------------------------------------------

LIST = """---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: fine}
    data: {a: b}
  - apiVersion: v1
    kind: ConfigMapList
    items:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: bad}
        data: {k: [1]}
---
apiVersion: v1
kind: SecretList
items: null
---
apiVersion: v1
kind: ConfigMap
metadata: {name: after}
"""


def test_the_items_of_a_list_are_objects():
    manifests = parse_stream(LIST, "list.yaml", env="dev")
    assert [(m.resource, m.file, m.env) for m in manifests] == [
        ("ConfigMap/fine", "list.yaml", "dev"),
        ("ConfigMap/bad", "list.yaml", "dev"),
        ("ConfigMap/after", "list.yaml", "dev"),
    ]
    # A kind that ends in "List" without items is an object of its own (kustomize does the same).
    plain = parse_stream("apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\n", "a.yaml")
    assert [m.resource for m in plain] == ["AllowList/a"]


@pytest.mark.parametrize(
    "items, says", [("{a: b}", "List: items is not a list"), ("[plain]", "List: items[0] is not a mapping")]
)
def test_a_malformed_list_is_one_line(items, says):
    with pytest.raises(InputError) as refused:
        parse_stream(f"apiVersion: v1\nkind: List\nitems: {items}\n", "l.yaml")
    assert str(refused.value) == f"l.yaml: {says}"


def test_an_item_of_a_list_is_validated(repo, tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text(LIST)
    result = tool(repo, "validate", "--quiet", "--format", "json", str(listed))
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert [(f["rule"], f["resource"], f["path"], f["file"]) for f in findings] == [
        ("schema-invalid", "ConfigMap/bad", "data.k", str(listed))
    ]
    assert json.loads(result.stdout)["summary"]["objects"] == 3
    passing = tmp_path / "fine.yaml"
    passing.write_text(LIST.replace("{k: [1]}", "{k: v}"))
    result = tool(repo, "validate", "--quiet", "--format", "json", str(passing))
    assert result.returncode == 0 and json.loads(result.stdout)["findings"] == [], result.stdout


# --- two checkouts of one repository at once ------------------------------------------------------------


def test_concurrent_worktrees_of_one_repository(repo):
    commit = gitrefs.resolve("HEAD", repo)
    barrier = threading.Barrier(2)

    def checkout(_):
        barrier.wait(timeout=30)
        with gitrefs.worktree(commit, repo) as tree:
            return tree, (tree / "platform.yaml").is_file()

    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(20):  # the race it guards against lost about 1 run in 35
            trees = list(pool.map(checkout, range(2)))
            assert [present for _, present in trees] == [True, True]
            assert trees[0][0] != trees[1][0] and not any(tree.exists() for tree, _ in trees)
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_concurrent_two_ref_diffs(repo):
    (repo / "overlays" / "dev" / "settings.yaml").write_text(
        (repo / "overlays" / "dev" / "settings.yaml").read_text() + "\n"
    )
    git(repo, "commit", "--quiet", "-am", "touch")
    runs = [
        subprocess.Popen(
            [str(repo / "scripts" / "diff"), "--base", "HEAD~1", "--head", "HEAD", "--env", "dev"],
            cwd=repo,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(10)
    ]
    results = [(run.wait(timeout=600), run.stderr.read()) for run in runs]
    assert [code for code, _ in results] == [0] * 10, results
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


# --- render --out ------------------------------------------------------------------------------------------


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".git" not in p.parts)


@pytest.mark.parametrize(
    "out, says",
    [
        (".", ".: --out is the repository or a folder that holds it; choose a folder of its own"),
        ("..", "..: --out is the repository or a folder that holds it; choose a folder of its own"),
        ("overlays", "overlays: the folder holds files render did not write; choose another --out or empty it"),
        ("clusters", "clusters: the folder holds files render did not write; choose another --out or empty it"),
        (
            "overlays/out",
            "overlays/out: --out is inside overlays/, which holds the repository's sources; choose another",
        ),
        (
            "clusters/dev/out",
            "clusters/dev/out: --out is inside clusters/, which holds the repository's sources; choose another",
        ),
    ],
)
def test_render_refuses_an_out_that_holds_sources(repo, out, says):
    before = listing(repo.parent)
    assert one_line(tool(repo, "render", "--out", out), "render") == says
    assert listing(repo.parent) == before
    untouched(repo)


def test_render_replaces_only_its_own_output(repo, tmp_path):
    foreign = tmp_path / "mine"
    (foreign / "dev").mkdir(parents=True)
    (foreign / "dev" / "notes.yaml").write_text("mine: true\n")  # shaped like a render output, without its marker
    said = one_line(tool(repo, "render", "--out", str(foreign)), "render")
    assert said == f"{foreign}: the folder holds files render did not write; choose another --out or empty it"
    assert listing(foreign) == ["dev", "dev/notes.yaml"]

    out = tmp_path / "out"
    assert tool(repo, "render", "--env", "dev", "--out", str(out)).returncode == 0
    assert "prod/eksctl.yaml" not in listing(out)
    assert tool(repo, "render", "--out", str(out)).returncode == 0  # an earlier render's output: replaced whole
    first = listing(out)
    assert ".gitops-render" in first and "dev/training.yaml" in first and "prod/eksctl.yaml" in first
    (out / "dev" / "mine.yaml").write_text("kind: Mine\n")  # a person's file, shaped like render's own
    said = one_line(tool(repo, "render", "--out", str(out)), "render")
    assert said == f"{out}: the folder holds files render did not write; choose another --out or empty it"
    assert (out / "dev" / "mine.yaml").read_text() == "kind: Mine\n"
    (out / "dev" / "mine.yaml").unlink()

    (out / "notes.txt").write_text("mine\n")  # a person's file in the output: no longer render's alone
    said = one_line(tool(repo, "render", "--out", str(out)), "render")
    assert said == f"{out}: the folder holds files render did not write; choose another --out or empty it"
    assert (out / "notes.txt").read_text() == "mine\n" and listing(out) == sorted([*first, "notes.txt"])


# --- diff with one environment that does not render ---------------------------------------------------------


def break_dev_and_change_prod(repo: Path) -> None:
    kustomization = repo / "overlays" / "dev" / "training" / "kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    config["resources"].append("missing.yaml")
    kustomization.write_text(yaml.safe_dump(config, sort_keys=False))
    settings = repo / "overlays" / "prod" / "settings.yaml"
    settings.write_text(settings.read_text().replace("- us-west-2b\n", "- us-west-2c\n", 1))


def test_an_environment_that_does_not_render_leaves_the_others_shown(repo):
    break_dev_and_change_prod(repo)
    result = tool(repo, "diff", "--base", "main", "--format", "json")
    assert result.returncode == 2
    shown = json.loads(result.stdout)["environments"]
    assert [(env["name"], env["status"]) for env in shown] == [("prod", "changed")]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("diff: working tree does not render: overlays/dev/training: "), lines[0]
    assert lines[0].endswith("missing.yaml: no such file or directory (environment dev; its diff is left out)")
    assert str(repo) not in result.stderr

    # Broken on the base side: dev is left out too (not shown as removed or added).
    git(repo, "commit", "--quiet", "-am", "dev broken")
    git(repo, "checkout", "--quiet", "HEAD~1", "--", "overlays/dev")  # the working tree's dev renders
    result = tool(repo, "diff", "--base", "HEAD", "--format", "json")
    assert result.returncode == 2 and [env["name"] for env in json.loads(result.stdout)["environments"]] == ["prod"]
    assert result.stderr.startswith("diff: HEAD (") and "(environment dev; its diff is left out)" in result.stderr


def test_the_comment_and_the_text_name_the_broken_environment_first_escaped(repo, tmp_path):
    kustomization = repo / "overlays" / "dev" / "training" / "kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    config["resources"].append("x`</details><b>y.yaml")  # a name that would end the comment's HTML
    kustomization.write_text(yaml.safe_dump(config, sort_keys=False))
    comment = tmp_path / "comment.md"

    result = tool(repo, "diff", "--base", "main", "--markdown-output", str(comment))

    assert result.returncode == 2, result.stderr
    [line] = [e for e in result.stderr.splitlines() if "does not render" in e]
    error = line.removeprefix("diff: ")
    assert "x`</details><b>y.yaml" in error and str(repo) not in error
    body = comment.read_text()
    assert body.index("### 🛑 Not rendered") < body.index("No changes in the environments that render.")
    [item] = [e for e in body.splitlines() if e.startswith("- **dev**: ")]
    assert item == f"- **dev**: ``{error}``"  # one backtick inside, so a two-backtick span: all of it is text
    assert "No changes in the rendered manifests." not in body + result.stdout
    text = result.stdout
    assert text.index(f"  ERROR dev: {error}") < text.index("No changes in the environments that render.")


def test_a_diff_of_only_the_broken_environment_is_one_error(repo):
    break_dev_and_change_prod(repo)
    result = tool(repo, "diff", "--base", "main", "--env", "dev")
    assert one_line(result, "diff").startswith("working tree does not render: overlays/dev/training: ")
    assert result.stdout == ""
    passing = tool(repo, "diff", "--base", "main", "--env", "prod")
    assert passing.returncode == 0 and "prod" in passing.stdout and passing.stderr == ""


# --- interrupted generators ---------------------------------------------------------------------------------


def helper_slow_in_tmpdir(folder: Path, tmpdir: Path) -> dict:
    """An environment whose helper waits (after marking folder/started) before it answers, with TMPDIR at
    `tmpdir`, where the generators' scratch copy goes, so a signal lands while that copy exists."""
    folder.mkdir()
    shim = folder / "helper"
    shim.write_text(f'#!/bin/sh\ntouch "{folder}/started"\nsleep 30\nexec "{HELPER}" "$@"\n')
    shim.chmod(0o755)
    return environment(TMPDIR=str(tmpdir), GITOPS_HELPER=str(shim))


@pytest.mark.parametrize(
    "verb, args",
    [
        ("new-job", ("resnet", "--env", "dev", "--workers", "1")),
        ("new-environment", ("qa", "--instance-type", "g5.xlarge", "--nodes", "1")),
    ],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_generator_leaves_nothing_in_the_repository_or_tmpdir(repo, tmp_path, verb, args, signum):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = helper_slow_in_tmpdir(tmp_path / "bin", scratch)
    process = subprocess.Popen(
        [str(repo / "scripts" / verb), *args],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for(tmp_path / "bin" / "started")  # the generator is rendering its scratch copy in TMPDIR
    assert list(scratch.iterdir()), "the scratch copy is in TMPDIR while the generator works"
    os.killpg(process.pid, signum)
    out, err = process.communicate(timeout=60)
    result = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    assert one_line(result, verb, 128 + signum) == "interrupted"
    untouched(repo)
    assert [p.name for p in repo.rglob("*") if p.name.startswith(".generate-") or p.name.endswith(".new")] == []
    assert list(scratch.iterdir()) == []


def test_write_all_interrupted_while_staging_leaves_nothing(tmp_path):
    root = tmp_path / "repo"
    (root / "overlays").mkdir(parents=True)
    blocked = root / "overlays" / f".b.yaml.{os.getpid()}.new"
    os.mkfifo(blocked)  # writing the second file waits here until the interrupt
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            write_all(root, {"overlays/new/a.yaml": "a: 1\n", "overlays/b.yaml": "b: 2\n"})
    finally:
        timer.cancel()
    assert listing(root) == ["overlays"]  # the staged file, its folder and the cut-short temporary are gone
