"""Hostile input, hangs: nothing read blocks or grows without bound. Every input (YAML's size, depth and aliases,
.sourceignore and .yamllint patterns, what yamllint is given) is bounded, and past a limit the tools say so in one
line (or, for a file only yamllint reads, a warning) instead of working for minutes. Each case runs under a
subprocess timeout, so a regression fails rather than hangs; none asserts a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hostile import last_line
from test_cli import environment, tool

from eks_gpu_gitops.core import yaml_limits
from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.core.files import TooLarge, Unreadable, read_bounded
from eks_gpu_gitops.core.yaml_file import load_mapping
from eks_gpu_gitops.model import parse_stream
from eks_gpu_gitops.render import flux_source
from eks_gpu_gitops.render.flux_source import ArtifactFilter
from eks_gpu_gitops.validate import lint as lint_stage
from eks_gpu_gitops.validate import load as load_stage

TIMEOUT = 120  # seconds a case may take before it counts as a hang (each takes a few)

DEEP_FLOW = "[" * 100_000 + "]" * 100_000  # 200 KB: libyaml's composer overflows the C stack on it
BACKTRACKING_IGNORE = "**/**/**/**/**/**/**/**/**/**/**/a*a*a*a*a*a*a*a*a*b"


def run(repo: Path, verb: str, *args: str, tmp_path: Path, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """A verb of the repository's scripts, with a render cache of the test's own and a timeout."""
    return subprocess.run(
        [str(repo / "scripts" / verb), *args],
        cwd=repo,
        env=environment(GITOPS_RENDER_CACHE=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def python(code: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter: what used to hang or crash the process cannot take the test run with it."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, check=False
    )


def use_in_training(repo: Path, name: str) -> None:
    """Make the prod training overlay's kustomization list `name` among its resources."""
    kustomization_file = repo / "overlays/prod/training/kustomization.yaml"
    kustomization = yaml.safe_load(kustomization_file.read_text())
    kustomization["resources"].append(name)
    kustomization_file.write_text(yaml.safe_dump(kustomization))


def nested(depth: int) -> str:
    """A ConfigMap whose annotation value is a mapping nested `depth` levels below the document."""
    value = "x"
    for _ in range(depth - 2):
        value = {"a": value}
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep", "annotations": value}}
    return yaml.safe_dump(doc, width=10_000)


def layered_bomb(levels: int = 5, size: int = 1_000) -> str:
    """A string of `size` characters aliased 10**`levels` times through `levels` layers of ten: a few kilobytes."""
    lines = [f"l0: &l0 {'x' * size}"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def string_bomb(aliases: int = 100_000, size: int = 100_000) -> str:
    """One string of `size` characters, anchored once and aliased `aliases` times: few nodes, gigabytes of text."""
    items = ", ".join(["*big"] * aliases)
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\nbig: &big {'x' * size}\ndata: {{k: [{items}]}}\n"


# --- yaml_limits: size, depth and aliases -------------------------------------------------------------------


def test_one_string_aliased_many_times_is_refused_by_its_size_in_characters():
    text = string_bomb()  # 500 KB of text, 10 GB once expanded, but only 100,003 nodes: under the node limit
    with pytest.raises(InputError) as refused:
        parse_stream(text, "overlays/prod/big.yaml")
    assert str(refused.value) == (
        "overlays/prod/big.yaml: its aliases expand to more than 64 MiB of text (an alias bomb?); refused"
    )
    for load in (yaml_limits.load, yaml_limits.load_all, yaml_limits.compose_all, yaml_limits.check_text):
        with pytest.raises(yaml_limits.LimitError, match="64 MiB of text"):
            load(text)
    # Under the limit, the same shape loads: 100 aliases of 100 KB.
    assert len(parse_stream(string_bomb(aliases=100), "ok.yaml")[0].doc["data"]["k"]) == 100


@pytest.mark.parametrize(
    "text",
    [
        "[" * 101 + "]" * 101,
        "a: {" * 101 + "}" * 101,
        "".join(" " * i + "a:\n" for i in range(101)) + " " * 101 + "b\n",
        "- " * 101 + "x\n",
        "? " * 101 + "x\n",
        nested(101),
    ],
    ids=["flow-sequences", "flow-mappings", "block-mappings", "block-sequences", "explicit-keys", "manifest"],
)
def test_a_document_nested_past_the_limit_is_refused_before_it_is_composed(text):
    with pytest.raises(InputError, match=r"^deep.yaml: nested more than 100 levels deep; refused$"):
        parse_stream(text, "deep.yaml")
    for load in (yaml_limits.load, yaml_limits.load_all, yaml_limits.compose_all, yaml_limits.check_text):
        with pytest.raises(yaml_limits.LimitError, match="nested more than 100 levels"):
            load(text)


def test_nesting_at_the_limit_loads_and_every_walker_gets_through_it():
    text = nested(yaml_limits.MAX_DEPTH)
    manifest = parse_stream(text, "deep.yaml")[0]
    # What walks a loaded document afterwards: the representer, json, deepcopy.
    assert yaml.safe_load(yaml.safe_dump(manifest.doc)) == manifest.doc
    assert json.loads(json.dumps(manifest.doc)) == manifest.doc


def test_depth_through_aliases_counts_as_written_out():
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 120)]
    with pytest.raises(yaml_limits.LimitError, match="nested more than 100 levels deep"):
        yaml_limits.load("\n".join(lines) + "\n")


def test_two_hundred_kilobytes_of_brackets_never_reach_libyaml_s_composer():
    # Unguarded, yaml.load with libyaml's loader dies of a segmentation fault on this text, with no line at all.
    result = python(
        """
        from eks_gpu_gitops.model import parse_stream
        try:
            parse_stream("[" * 100_000 + "]" * 100_000, "deep.yaml")
        except Exception as error:
            print(error)
        """
    )
    assert (result.returncode, result.stdout.strip()) == (0, "deep.yaml: nested more than 100 levels deep; refused")


def test_every_real_manifest_and_schema_loads_within_the_limits():
    roots = [Path(os.environ[name]) for name in ("GITOPS_SCHEMA_DIR", "GITOPS_CORPUS_DIR") if os.environ.get(name)]
    files = [f for root in roots for f in sorted(root.rglob("*")) if f.suffix in (".yaml", ".yml")]
    if not files:
        pytest.skip("no schemas or corpus here")
    for file in files:
        text = file.read_text()
        yaml_limits.load_all(text)  # nothing refused
        assert lint_stage._measure(text)[0] == "", file  # and yamllint is given each of them
        for node in yaml_limits.compose_all(text):
            if node is not None:
                nodes, size, depth = yaml_limits.expanded(node)
                assert nodes * 50 < yaml_limits.MAX_EXPANDED and size * 100 < yaml_limits.MAX_EXPANDED_BYTES
                assert depth * 2 < yaml_limits.MAX_DEPTH, file


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_settings_file_or_an_input_that_is_no_small_regular_file_is_refused_unread(tmp_path, kind):
    file = tmp_path / "platform.yaml"
    if kind == "fifo":
        os.mkfifo(file)
    elif kind == "dev-zero":
        file.symlink_to("/dev/zero")
    else:
        with file.open("wb") as out:
            out.truncate(yaml_limits.MAX_FILE_BYTES + 1)  # sparse: nothing is written
    why = "larger than 64 MiB" if kind == "huge" else "not a regular file"
    with pytest.raises(InputError, match=f"^{file}: cannot read: {why}"):
        load_mapping(file)
    with pytest.raises(InputError, match=f"^{file}: cannot read: {why}"):
        load_stage.read_file(file, tmp_path)
    with pytest.raises(TooLarge if kind == "huge" else Unreadable):
        read_bounded(file, 1 << 20, follow_links=True)


# --- .sourceignore: the matcher ------------------------------------------------------------------------------


def excluded(pattern: str, path: str, folder: bool = False, domain: tuple[str, ...] = ()) -> bool | None:
    """What one .sourceignore pattern says of a path: True (left out), False (kept by a `!` pattern), None."""
    encoded = tuple(part.encode() for part in domain)
    return flux_source._Pattern(pattern.encode(), encoded).match(
        tuple(part.encode() for part in path.split("/")), folder, flux_source._Meter()
    )


# (pattern, path, is a folder, what go-git says), each a rule of fluxcd/pkg sourceignore/gitignore (go-git's),
# in this test's own words.
GO_GIT_CASES = [
    # A pattern without a slash names a component anywhere in the path.
    ("secret.yaml", "secret.yaml", False, True),
    ("secret.yaml", "apps/db/secret.yaml", False, True),
    ("apps", "apps/db/secret.yaml", False, True),
    ("secret", "apps/secret.yaml", False, None),
    ("secret.yam", "secret.yaml", False, None),
    # A trailing slash wants a folder: the last component must be one, a component before it always is.
    ("build/", "build", True, True),
    ("build/", "build", False, None),
    ("build/", "x/build/out.yaml", False, True),
    # A slash anywhere else anchors the pattern at its .sourceignore's folder.
    ("/notes.md", "notes.md", False, True),
    ("/notes.md", "docs/notes.md", False, None),
    ("docs/notes.md", "docs/notes.md", False, True),
    ("docs/notes.md", "x/docs/notes.md", False, None),
    ("docs/notes.md", "docs", True, None),
    ("/docs", "docs/notes.md", False, True),
    # Wildcards: `*` within a component, `?` one character, classes, escapes.
    ("*.png", "img/logo.png", False, True),
    ("/*/eksctl/", "prod/eksctl", True, True),
    ("/*/eksctl/", "prod/x/eksctl", True, None),
    ("log?.txt", "log1.txt", False, True),
    ("log?.txt", "log12.txt", False, None),
    ("[a-c]at.yaml", "bat.yaml", False, True),
    ("[a-c]at.yaml", "dat.yaml", False, None),
    ("[^a]at.yaml", "bat.yaml", False, True),
    ("[^a]at.yaml", "aat.yaml", False, None),
    ("\\*.yaml", "*.yaml", False, True),
    ("\\*.yaml", "a.yaml", False, None),
    # `**`: any number of components, where it stands alone; the first component the next part matches is
    # taken and never given back (go-git; git itself would match a/a/b).
    ("**/config.yaml", "config.yaml", False, True),
    ("**/config.yaml", "a/b/config.yaml", False, True),
    ("a/**/b", "a/b", False, True),
    ("a/**/b", "a/x/y/b", False, True),
    ("**/a/b", "a/a/b", False, None),
    ("a/**", "a/x", False, True),
    ("a/**", "a", False, True),
    ("x/a**b", "x/ab", False, None),
    # A malformed part matches nothing: an open class, a class that starts with `]`, a final backslash.
    ("v[ou]l[", "vol[", False, None),
    ("[]a]", "]", False, None),
    ("[]a]", "a", False, None),
    ("x\\", "x\\", False, None),
    # `!` keeps what an earlier pattern left out; trailing spaces go, unless escaped.
    ("!keep.yaml", "keep.yaml", False, False),
    ("notes.md  ", "notes.md", False, True),
    ("notes.md\\ ", "notes.md ", False, True),
    ("notes.md\\ ", "notes.md", False, None),
    # Runes: `?` is one UTF-8 character, `*` a run of bytes (Go's filepath.Match on strings).
    ("caf?", "café", False, True),
    ("*??", "€", False, True),
    ("???", "€", False, None),
]


@pytest.mark.parametrize(("pattern", "path", "folder", "expected"), GO_GIT_CASES)
def test_sourceignore_patterns_match_as_go_git_does(pattern, path, folder, expected):
    assert excluded(pattern, path, folder) is expected


def test_a_pattern_of_a_subfolder_matches_only_below_it():
    assert excluded("*.txt", "training/notes.txt", domain=("training",)) is True
    assert excluded("*.txt", "notes.txt", domain=("training",)) is None
    assert excluded("training", "training", folder=True, domain=("training",)) is None  # not the folder itself
    assert excluded("/notes.txt", "other/training/notes.txt", domain=("training",)) is None


def test_a_pattern_that_used_to_backtrack_for_minutes_finishes(tmp_path):
    # The regular expression a gitignore library makes of this pattern takes minutes on one 60-character name.
    (tmp_path / ".sourceignore").write_text(BACKTRACKING_IGNORE + "\n")
    result = python(
        f"""
        from pathlib import Path
        from eks_gpu_gitops.render.flux_source import ArtifactFilter
        artifact = ArtifactFilter(Path({str(tmp_path)!r}))
        print(repr(artifact.why("/".join(["a" * 250] * 16))), repr(artifact.why("x/" + "a" * 250 + "b")))
        """
    )
    said = f"'' '.sourceignore excludes it ({BACKTRACKING_IGNORE})'"
    assert (result.returncode, result.stdout.strip()) == (0, said), result.stderr


def test_sourceignore_lines_are_read_as_go_s_scanner_reads_them(tmp_path):
    (tmp_path / ".sourceignore").write_bytes(b"# a comment\r\n/drafts/\r\n \t\r\n\xe3\x80\x80\n*.tmp")
    artifact = ArtifactFilter(tmp_path)
    assert [line for _, line, _, where in artifact.patterns if where] == ["/drafts/", "*.tmp"]
    assert artifact.why("drafts", folder=True) == ".sourceignore excludes it (/drafts/)"
    assert artifact.why("a/b.tmp") == ".sourceignore excludes it (*.tmp)"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"x\n" * 1001, r"^\.sourceignore:1001: more than 1,000 patterns in the repository's \.sourceignore files"),
        (b"a" * 4097 + b"\n", r"^\.sourceignore:1: a pattern longer than 4,096 bytes; refused$"),
        (b"#" + b"a" * (64 << 10), r"^\.sourceignore:1: a line of 64 KiB or more, where source-controller stops"),
        (b"# padding\n" * 110_000, r"^\.sourceignore: larger than 1 MiB \(1,100,000 bytes\); refused$"),
    ],
    ids=["patterns", "pattern-length", "scanner-line", "file-size"],
)
def test_sourceignore_past_a_limit_is_refused_in_one_line(tmp_path, content, says):
    (tmp_path / ".sourceignore").write_bytes(content)
    with pytest.raises(InputError, match=says):
        ArtifactFilter(tmp_path)


def test_patterns_are_counted_across_the_repository_s_sourceignore_files(tmp_path):
    (tmp_path / ".sourceignore").write_text("x\n" * 600)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".sourceignore").write_text("y\n" * 401)
    with pytest.raises(InputError, match=r"^sub/\.sourceignore:401: more than 1,000 patterns"):
        ArtifactFilter(tmp_path)


def test_the_steps_of_the_matcher_over_a_run_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(flux_source, "MAX_MATCH_STEPS", 10_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".sourceignore").write_text("*" + "[a]" * 200 + "b\n")
    artifact = ArtifactFilter(tmp_path)
    with pytest.raises(InputError, match=r"^sub/\.sourceignore: matching its patterns .* more than 10,000 steps"):
        for number in range(100):
            artifact.why(f"sub/{number:03}" + "a" * 250)


# --- lint: what yamllint is given ------------------------------------------------------------------------------


def linted(repo: Path, name: str, content: str | bytes) -> list:
    file = repo / name
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(content.encode() if isinstance(content, str) else content)
    return [(f.severity, f.message) for f in lint_stage.lint([file], repo, lambda line: None)]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("---\n" + "[" * 8_000 + "]" * 8_000 + "\n", "nested more than 100 levels deep"),
        ("---\n" + "".join(f"k{i}: 1\n" for i in range(5_001)), "a mapping of 5,001 keys"),
        ("---\n" + "- [a, b, c, d, e, f, g, h]\n" * 11_200, "more than 100,000 YAML tokens"),
    ],
    ids=["deep", "keys", "tokens"],
)
def test_lint_gives_yamllint_no_file_past_a_limit_and_says_so(repo, content, says):
    ((severity, message),) = linted(repo, "overlays/prod/unused.yaml", content)
    assert severity == "warning" and message.startswith("not linted: " + says), message


def test_lint_never_reads_a_file_past_its_size_limit(repo):
    file = repo / "overlays/prod/unused.yaml"
    with file.open("wb") as out:
        out.truncate(100 << 20)  # 100 MB, sparse
    ((severity, message),) = [(f.severity, f.message) for f in lint_stage.lint([file], repo, lambda line: None)]
    assert severity == "warning"
    assert message == "not linted: larger than 2 MiB (100 MiB), more than validate gives yamllint"


def test_lint_stops_giving_yamllint_files_once_a_run_s_total_is_spent(repo, monkeypatch):
    monkeypatch.setattr(lint_stage, "MAX_TOTAL_BYTES", 4_000)
    files = []
    for number in range(5):
        files.append(repo / f"overlays/prod/part{number}.yaml")
        files[-1].write_text("---\n" + f"# {number}\n" + "".join(f"key{n}: value\n" for n in range(100)))
    found = [(f.file, f.message) for f in lint_stage.lint(files, repo, lambda line: None)]
    assert found == [
        (
            "overlays/prod/part3.yaml",
            "not linted, nor 1 more file after it: the files before it hold the most validate gives yamllint in one "
            "run (4,000 bytes or 400,000 tokens)",
        )
    ]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("extends: /dev/zero\n", "extends '/dev/zero': cannot read: not a regular file"),
        ("extends: .yamllint\n", "extends '.yamllint': a configuration that extends itself (a loop)"),
        (f"ignore: |\n  {BACKTRACKING_IGNORE}\n", "more than 3 wildcards, or more than 2 that cross a `/`"),
        ("ignore: |\n" + "  x\n" * 501, "more than 500 path patterns"),
        ("ignore-from-file: pipe\n", "ignore-from-file 'pipe': cannot read: not a regular file"),
        ("rules:\n  quoted-strings:\n    extra-required: ['(a+)+$']\n", "extra-required '(a+)+$': a repetition"),
        ("rules:\n  key-ordering:\n    ignored-keys: ['\\d+$']\n", "ignored-keys '\\\\d+$': a repetition"),
        ("rules: " + "{a: " * 200 + "}" * 200 + "\n", "nested more than 100 levels deep; refused"),
        (layered_bomb(), "its aliases expand to more than 64 MiB of text"),
    ],
    ids=["dev-zero", "loop", "backtracking", "patterns", "fifo", "nested-regex", "unanchored-regex", "deep", "bomb"],
)
def test_a_yamllint_configuration_past_a_limit_is_refused_in_one_line(repo, tmp_path, config, says):
    (repo / ".yamllint").write_text(config)
    os.mkfifo(repo / "pipe")  # ignore-from-file: pipe
    result = run(repo, "validate", "--env", "prod", "--quiet", tmp_path=tmp_path)
    line = last_line(result, "validate")
    assert line.startswith(f"{repo / '.yamllint'}: invalid yamllint configuration: ") and says in line, line


# --- the command line ----------------------------------------------------------------------------------------


def test_validate_warns_of_unused_hostile_files_and_finishes(repo, tmp_path):
    unused = repo / "overlays/prod/unused"
    unused.mkdir()
    (unused / "deep.yaml").write_text("---\n" + "[" * 8_000 + "]" * 8_000 + "\n")  # 16 KB
    (unused / "keys.yaml").write_text("---\n" + "".join(f"k{i}: 1\n" for i in range(200_000)))  # a million-ish keys
    with (unused / "huge.yaml").open("wb") as out:
        out.truncate(100 << 20)
    (unused / "line.yaml").write_text("---\nkey: " + "x" * (3 << 20) + "\n")  # one line of 3 MB
    result = run(repo, "validate", "--env", "prod", "--quiet", "--format", "json", tmp_path=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lint = {
        Path(f["file"]).name: f["message"]
        for f in json.loads(result.stdout)["findings"]
        if f["rule"] == "yaml-lint" and f["severity"] == "warning" and f["message"].startswith("not linted")
    }
    assert lint == {
        "deep.yaml": "not linted: nested more than 100 levels deep, more than validate gives yamllint",
        "keys.yaml": (
            "not linted: a mapping of 5,001 keys, more than validate gives yamllint (it compares every key with "
            "every other: at most 25,000,000 comparisons in a file)"
        ),
        "huge.yaml": "not linted: larger than 2 MiB (100 MiB), more than validate gives yamllint",
        "line.yaml": "not linted: larger than 2 MiB (3,145,738 bytes), more than validate gives yamllint",
    }


@pytest.mark.parametrize("verb", ["render", "validate"])
@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_a_deeply_nested_file_a_build_uses_is_refused_in_one_line(repo, tmp_path, verb, depth):
    # kustomize refuses 10,000 levels and more itself; under that, what it builds is refused here, by the build.
    nesting = "[" * depth + "]" * depth
    deep = f"apiVersion: example.com/v1\nkind: Deep\nmetadata:\n  name: deep\nspec: {nesting}\n"
    (repo / "overlays/prod/training/deep.yaml").write_text(deep)
    use_in_training(repo, "deep.yaml")
    args = ("--out", str(tmp_path / "out")) if verb == "render" else ("--quiet",)
    line = last_line(run(repo, verb, "--env", "prod", *args, tmp_path=tmp_path), verb)
    if depth < 10_000:
        assert line == "overlays/prod/training: nested more than 100 levels deep; refused"
    else:
        assert line.startswith("overlays/prod/training: kustomize build failed: ") and line.endswith(
            "exceeded max depth of 10000 in File: deep.yaml"
        ), line


def test_a_deeply_nested_file_in_clusters_is_refused_in_one_line(repo, tmp_path):
    (repo / "clusters/prod/deep.yaml").write_text(DEEP_FLOW + "\n")
    line = last_line(run(repo, "validate", "--env", "prod", "--quiet", tmp_path=tmp_path), "validate")
    assert "deep.yaml" in line and "nested more than 100 levels deep" in line, line


def test_a_deeply_nested_kustomization_is_refused_in_one_line(repo, tmp_path):
    kustomization = repo / "overlays/prod/training/kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "x: " + DEEP_FLOW + "\n")
    line = last_line(run(repo, "render", "--env", "prod", "--out", str(tmp_path / "out"), tmp_path=tmp_path), "render")
    assert "kustomization.yaml" in line and "nested more than 100 levels deep" in line, line


def test_validate_refuses_an_input_file_nested_too_deeply_or_aliased_too_large(repo, tmp_path):
    deep, bomb = tmp_path / "deep.yaml", tmp_path / "bomb.yaml"
    deep.write_text(DEEP_FLOW + "\n")
    bomb.write_text(string_bomb())
    line = last_line(run(repo, "validate", "--quiet", str(deep), tmp_path=tmp_path), "validate")
    assert line == f"{deep}: nested more than 100 levels deep; refused"
    line = last_line(run(repo, "validate", "--quiet", str(bomb), tmp_path=tmp_path), "validate")
    assert line == f"{bomb}: its aliases expand to more than 64 MiB of text (an alias bomb?); refused"


def test_render_with_a_backtracking_sourceignore_pattern_finishes(repo, tmp_path):
    (repo / ".sourceignore").write_text(BACKTRACKING_IGNORE + "\n")
    long_name = repo / "overlays/prod/training" / ("a" * 200 + ".txt")
    long_name.write_text("not YAML\n")
    result = run(repo, "render", "--env", "prod", "--out", str(tmp_path / "out"), tmp_path=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def test_render_refuses_a_sourceignore_of_too_many_patterns_in_one_line(repo, tmp_path):
    (repo / "overlays/prod/.sourceignore").write_text("".join(f"/never-{n}\n" for n in range(1_001)))
    line = last_line(run(repo, "render", "--env", "prod", "--out", str(tmp_path / "out"), tmp_path=tmp_path), "render")
    assert line == (
        "overlays/prod/.sourceignore:1001: more than 1,000 patterns in the repository's .sourceignore files; refused"
    )


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
