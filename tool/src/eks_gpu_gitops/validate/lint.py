"""The lint stage: yamllint over the YAML sources, each file with the configuration of the repository it
lives in (found from the file's own location, never the current directory).

A file outside any repository made by the template is not held to a repository's style: only what
changes its meaning counts there (a syntax error, an input error; a duplicate key, whose later value
silently wins).

yamllint is pure Python: validate runs it in a forked copy of itself (`Background`), so that it does not
hold the interpreter's lock while the load stage renders.

Bounded work. yamllint reads about a megabyte a second here, spends some 30 microseconds a token, compares every
key of a mapping with every other one (key-duplicates, key-ordering), slows down with the square of the nesting
(4,000 levels of `[`, 8 KB, take five seconds), and matches every file's path against the .yamllint's patterns
with Python's backtracking regular expressions. So before a file is handed to it, its size, its tokens, their
nesting and its keys are measured (libyaml's scanner: C, no recursion, stopping at the first limit passed), and a
file past a limit is not linted, with a warning that says why (an unused huge file is no failure on the cluster;
a file a build uses is read, and refused if it must be, by the render); so are the files after a run's total is
spent. The .yamllint itself (and what it extends or takes ignore patterns from) is read bounded, with
yaml_limits, and its patterns and regular expressions are held to shapes whose matching time is bounded:
a configuration past a limit is refused in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..core import yaml_limits
from ..core.errors import InputError
from ..core.files import TooLarge, Unreadable, read_bounded, size_text
from ..model import relative
from ..render import render_cache
from ..rules.registry import Finding
from ..rules.stages import YAML_LINT
from .plan import find_root

CONFIG_FILES = (".yamllint", ".yamllint.yaml", ".yamllint.yml")
OUTSIDE_A_REPOSITORY = "rules:\n  key-duplicates: enable\n"

# What yamllint is given. The largest real source there is (kubeflow's MPI operator bundle, with its CRD) is
# 670 KB, 23,000 tokens and 35 levels deep; the template's sources are a few kilobytes each. Past a limit a file is
# not linted, with a warning (yamllint would take seconds to minutes over it).
MAX_FILE_BYTES = 2 << 20  # about two seconds of yamllint
MAX_FILE_TOKENS = 100_000  # about three seconds
MAX_DEPTH = yaml_limits.MAX_DEPTH  # yamllint's time grows with the square of the depth
# Key comparisons of key-duplicates (and key-ordering): the sum of the squares of the mappings' sizes. A mapping of
# 5,000 keys is 25,000,000, half a second; a real one holds at most a few hundred.
MAX_KEY_PAIRS = 25_000_000
# The files of one run together (a file whose text another one already has is not counted again), past which the
# files left are not linted: about twenty seconds of yamllint in all.
MAX_TOTAL_BYTES = 8 << 20
MAX_TOTAL_TOKENS = 400_000
# A file's path, as its repository's patterns match it (a real one is under 200 characters): every pattern is matched
# against every path with backtracking regular expressions, whose time grows with a power of the path's length.
MAX_PATH = 512

# The .yamllint: a real one is a kilobyte, its ignore patterns a few dozen (a .gitignore given as ignore-from-file, a
# few hundred). A pattern becomes a regular expression (pathspec's gitignore translation); one with more than three
# repetitions, or more than two that cross a `/`, backtracks for minutes on a long path (`**a/a**a/a***b` takes 130 s
# on a 1 KB path; the worst allowed, `/**/a*/**/b`, 30 ms on a 4 KB one).
MAX_CONFIG_BYTES = 64 << 10
MAX_IGNORE_FILE_BYTES = 1 << 20
MAX_EXTENDS = 8
MAX_PATTERNS = 500
MAX_PATTERN_CHARS = 256
MAX_PATTERN_REPEATS = 3
MAX_PATTERN_CROSSING = 2
# Rule options that are regular expressions yamllint searches every scalar (or key) with. One with a repetition
# searched unanchored is quadratic (`\\d+$` over a 100 KB scalar: 36 s), nested or repeated ones exponential: a
# regular expression here may repeat single characters once if it is anchored with ^, never otherwise.
REGEX_OPTIONS = ("extra-required", "extra-allowed", "ignored-keys")
MAX_REGEXES = 100


def _config(root: Path | None):
    """The repository's .yamllint (yamllint's default when it has none); outside a repository, duplicate keys
    only. With what identifies it for the lint cache: yamllint's version and the configuration's text."""
    import yamllint
    from yamllint.config import YamlLintConfig, YamlLintConfigError

    if root is None:
        return YamlLintConfig(OUTSIDE_A_REPOSITORY), f"{yamllint.__version__}\0{OUTSIDE_A_REPOSITORY}"
    config_file = next((root / n for n in CONFIG_FILES if (root / n).is_file()), None)
    if config_file is None:
        return YamlLintConfig("extends: default"), f"{yamllint.__version__}\0extends: default"
    try:
        text = _checked_config(config_file, {config_file.resolve()}, [])
        config = YamlLintConfig(content=text)
    except _ConfigRefused as error:
        raise InputError(f"{config_file}: invalid yamllint configuration: {error}") from None
    except (YamlLintConfigError, OSError, UnicodeDecodeError, ValueError, re.error) as error:
        message = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{config_file}: invalid yamllint configuration: {message}") from None
    # A configuration that extends another file than yamllint's own has no identity of its own here.
    plain = all(
        line.split(":", 1)[-1].strip() in ("default", "relaxed")
        for line in text.splitlines()
        if line.startswith("extends:")
    )
    return config, f"{yamllint.__version__}\0{text}" if plain else None


class _ConfigRefused(Exception):
    """A yamllint configuration past a limit (one line)."""


def _config_text(file: Path, limit: int, label: str = "") -> str:
    """A file yamllint reads for its configuration, read bounded (never a FIFO or a device) and decoded as yamllint
    decodes it. `label` says which file it is in a refusal ("" for the configuration itself)."""
    from yamllint.decoder import auto_decode

    try:
        return auto_decode(read_bounded(file, limit, follow_links=True))
    except (Unreadable, UnicodeDecodeError, ValueError) as error:
        raise _ConfigRefused(f"{label}cannot read: {error}") from None


def _checked_config(file: Path, seen: set[Path], patterns: list[str], label: str = "") -> str:
    """The text of a yamllint configuration, once it and every file it extends or takes ignore patterns from are
    within the limits (_ConfigRefused otherwise; `patterns` gathers the path patterns of the whole chain). Paths are
    read as yamllint reads them: from the current folder."""
    from yamllint.config import get_extended_config_file

    text = _config_text(file, MAX_CONFIG_BYTES, label)
    try:
        conf = yaml_limits.load(text)
    except yaml_limits.LimitError as error:
        raise _ConfigRefused(f"{label}{error}") from None
    except (yaml.YAMLError, ValueError):
        return text  # not YAML: yamllint says so, in its own words
    if not isinstance(conf, dict):
        return text
    extends = conf.get("extends")
    if isinstance(extends, str):
        target = Path(get_extended_config_file(extends))
        where = f"{label}extends {extends!r}: "
        try:
            key = target.resolve()
        except (OSError, RuntimeError):
            raise _ConfigRefused(f"{where}cannot read: symbolic link loop") from None
        if key in seen:
            raise _ConfigRefused(f"{where}a configuration that extends itself (a loop)")
        if len(seen) >= MAX_EXTENDS:
            raise _ConfigRefused(f"{where}more than {MAX_EXTENDS} configurations extend one another")
        _checked_config(target, seen | {key}, patterns, where)
    regexes = _gathered(conf, patterns, label)
    if len(patterns) > MAX_PATTERNS:
        raise _ConfigRefused(f"{label}more than {MAX_PATTERNS:,} path patterns")
    for pattern in patterns:
        why = _pattern_problem(pattern)
        if why:
            raise _ConfigRefused(f"{label}pattern {pattern[:80]!r}: {why}")
    if len(regexes) > MAX_REGEXES:
        raise _ConfigRefused(f"{label}more than {MAX_REGEXES} regular expressions in rule options")
    for option, regex in regexes:
        why = _regex_problem(regex)
        if why:
            raise _ConfigRefused(f"{label}{option} {regex[:80]!r}: {why}")
    return text


def _lines_of(value) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    if isinstance(value, list):
        return [line for line in value if isinstance(line, str)]
    return []


def _gathered(conf: dict, patterns: list[str], label: str) -> list[tuple[str, str]]:
    """The path patterns a configuration gives yamllint (ignore, ignore-from-file, yaml-files, each rule's), added
    to `patterns` (comments and blank lines left out), and its rules' regular expressions, as (option, regex)."""
    rules = conf.get("rules")
    rules = [rule for rule in rules.values() if isinstance(rule, dict)] if isinstance(rules, dict) else []
    lines = _lines_of(conf.get("yaml-files"))
    regexes: list[tuple[str, str]] = []
    for place in (conf, *rules):
        lines += _lines_of(place.get("ignore"))
        for name in _lines_of(place.get("ignore-from-file")):
            if len(lines) > MAX_PATTERNS:
                break
            lines += _config_text(Path(name), MAX_IGNORE_FILE_BYTES, f"{label}ignore-from-file {name!r}: ").splitlines()
        if place is not conf:
            regexes += [(option, regex) for option in REGEX_OPTIONS for regex in _lines_of(place.get(option))]
    patterns += [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return regexes


try:
    from re import _parser as _sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]


_REPEATS = {_sre_parse.MAX_REPEAT, _sre_parse.MIN_REPEAT, getattr(_sre_parse, "POSSESSIVE_REPEAT", None)}
_SINGLE = {_sre_parse.LITERAL, _sre_parse.NOT_LITERAL, _sre_parse.ANY, _sre_parse.IN}


def _repeats(tree) -> tuple[int, int, bool]:
    """(repetitions that may repeat more than once, how many of them repeat any character (crossing a `/`),
    whether one repeats more than a single character or a back reference is made) in a parsed regular
    expression."""
    repeats = crossing = 0
    nested = False
    for op, argument in tree:
        children = []
        if op in _REPEATS:
            _, high, item = argument
            children = [item]
            if high > 1:
                repeats += 1
                single = len(item) == 1 and item[0][0] in _SINGLE
                nested = nested or not single
                crossing += single and item[0][0] == _sre_parse.ANY
        elif op == _sre_parse.SUBPATTERN:
            children = [argument[-1]]
        elif op == _sre_parse.BRANCH:
            children = list(argument[1])
        elif op in (_sre_parse.ASSERT, _sre_parse.ASSERT_NOT):
            children = [argument[1]]
        elif op == getattr(_sre_parse, "ATOMIC_GROUP", None):
            children = [argument]
        elif op in (_sre_parse.GROUPREF, _sre_parse.GROUPREF_EXISTS):
            nested = True
        for child in children:
            inner = _repeats(child)
            repeats, crossing, nested = repeats + inner[0], crossing + inner[1], nested or inner[2]
    return repeats, crossing, nested


def _pattern_problem(pattern: str) -> str:
    """Why a path pattern of a .yamllint is refused ("" when it is not)."""
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    try:
        regex, _ = GitIgnoreSpecPattern.pattern_to_regex(pattern)
    except ValueError as error:
        return " ".join(str(error).split())
    if regex is None:
        return ""
    regex = regex.removesuffix(".*$").removesuffix(".*")  # a final .* never backtracks
    repeats, crossing, _ = _repeats(_sre_parse.parse(regex))
    if repeats > MAX_PATTERN_REPEATS or crossing > MAX_PATTERN_CROSSING:
        return (
            f"more than {MAX_PATTERN_REPEATS} wildcards, or more than {MAX_PATTERN_CROSSING} that cross a `/` "
            "(matching it would take minutes on a long path)"
        )
    return ""


def _regex_problem(regex: str) -> str:
    """Why a regular expression of a rule's option is refused ("" when it is not)."""
    if len(regex) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    try:
        tree = _sre_parse.parse(regex)
        re.compile(regex)
    except (re.error, RecursionError, OverflowError) as error:
        return f"not a regular expression: {error}"
    repeats, _, complex_ = _repeats(tree)
    anchored = (
        len(tree) > 0
        and tree[0][0] == _sre_parse.AT
        and tree[0][1] in (_sre_parse.AT_BEGINNING, _sre_parse.AT_BEGINNING_STRING)
    )
    if complex_ or repeats > (1 if anchored else 0):
        return (
            "a repetition (only one of single characters, anchored with ^, is taken: yamllint searches every "
            "scalar with it, in time that grows with a power of the scalar's length)"
        )
    return ""


def _unique(files: list[Path]) -> list[Path]:
    found = {}
    for path in files:
        try:
            found.setdefault(path.resolve(), path)
        except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop
            raise InputError(f"{path}: cannot read: symbolic link loop") from None
    return list(found)


def lint(files: list[Path], root: Path, progress) -> list[Finding]:
    """yamllint findings (file names relative to `root`, where validate runs); a file that is not YAML at all is
    an input error. A file past a limit is not linted: a warning says why."""
    configs: dict[Path | None, object] = {}
    findings, cache, checked = [], {}, 0
    measured: dict[str, tuple[str, int]] = {}  # text -> (why it is not linted, its tokens)
    spent = [0, 0]  # bytes, tokens of the distinct texts given to yamllint
    left: list[str] = []  # files not linted once the run's totals were spent
    for path in _unique(files):
        own = find_root(path.parent)
        if own not in configs:
            configs[own] = _config(own)
        config, identity = configs[own]
        name = relative(path, root)
        inside = relative(path, own) if own else name  # what the repository's ignore patterns match
        if len(inside) > MAX_PATH:
            findings.append(_not_linted(name, f"a path of more than {MAX_PATH} characters"))
            continue
        if config.is_file_ignored(inside):
            continue
        try:
            data = read_bounded(path, MAX_FILE_BYTES)  # never a FIFO, a device or a file of gigabytes
        except TooLarge as error:
            findings.append(_not_linted(name, f"{error}, more than validate gives yamllint"))
            continue
        except Unreadable as error:
            raise InputError(f"{name}: cannot read: {error}") from None
        try:
            text = data.decode()
        except UnicodeDecodeError as error:
            raise InputError(f"{name}: cannot read: {error}") from None
        if text not in measured:
            measured[text] = _measure(text)
        why, tokens = measured[text]
        if why:
            findings.append(_not_linted(name, why))
            continue
        # Results depend on the text alone unless a rule ignores some paths; then on the name too.
        by_name = any(isinstance(c, dict) and c.get("ignore") for c in config.rules.values())
        key = (id(config), text, inside if by_name else "")
        if key not in cache:
            if left or spent[0] + len(data) > MAX_TOTAL_BYTES or spent[1] + tokens > MAX_TOTAL_TOKENS:
                left.append(name)
                continue
            spent[0] += len(data)
            spent[1] += tokens
            cache[key] = _problems(text, config, identity, inside, key[2])
        checked += 1
        for problem in cache[key]:
            if problem.rule is None:  # yamllint reports a parse failure as a rule-less error
                raise InputError(f"{name}:{problem.line}: invalid YAML: {problem.desc.removeprefix('syntax error: ')}")
            findings.append(
                YAML_LINT.finding(
                    None, f"{problem.desc} ({problem.rule})", severity=problem.level, file=name, line=problem.line
                )
            )
    if left:
        more = f", nor {len(left) - 1:,} more file{'s' if len(left) != 2 else ''} after it" if len(left) > 1 else ""
        totals = f"{size_text(MAX_TOTAL_BYTES)} or {MAX_TOTAL_TOKENS:,} tokens"
        findings.append(
            _not_linted(
                left[0], f"the files before it hold the most validate gives yamllint in one run ({totals})", more
            )
        )
    progress(f"yamllint: {checked} files, {len(findings)} problems")
    return findings


def _not_linted(name: str, why: str, more: str = "") -> Finding:
    return YAML_LINT.finding(None, f"not linted{more}: {why}", severity="warning", file=name, line=0)


_OPENING = (yaml.BlockSequenceStartToken, yaml.BlockMappingStartToken, yaml.FlowSequenceStartToken)
_OPENING += (yaml.FlowMappingStartToken,)
_CLOSING = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)


def _measure(text: str) -> tuple[str, int]:
    """(why yamllint is not given `text`, "" when it is; its tokens). Reads libyaml's tokens (yamllint reads the
    same ones, with PyYAML's scanner in Python): no recursion, and it stops at the first limit passed. A text that
    libyaml cannot scan is counted up to there (yamllint stops there too, and says why)."""
    scanner = yaml_limits.LOADER(text)
    keys: list[int] = []  # the keys so far of each open collection
    tokens = pairs = 0
    try:
        while scanner.check_token():
            kind = type(scanner.get_token())
            tokens += 1
            if tokens > MAX_FILE_TOKENS:
                return f"more than {MAX_FILE_TOKENS:,} YAML tokens, more than validate gives yamllint", tokens
            if kind in _OPENING:
                keys.append(0)
                if len(keys) > MAX_DEPTH:
                    return f"nested more than {MAX_DEPTH} levels deep, more than validate gives yamllint", tokens
            elif kind in _CLOSING:
                if keys:
                    pairs += keys.pop() ** 2
            elif kind is yaml.KeyToken and keys:
                keys[-1] += 1
                if pairs + keys[-1] ** 2 > MAX_KEY_PAIRS:
                    return (
                        f"a mapping of {keys[-1]:,} keys, more than validate gives yamllint (it compares every key "
                        f"with every other: at most {MAX_KEY_PAIRS:,} comparisons in a file)"
                    ), tokens
    except yaml.YAMLError:
        pass
    finally:
        scanner.dispose()
    return "", tokens


@dataclass(frozen=True)
class _Problem:
    line: int
    level: str
    rule: str | None
    desc: str


def _problems(text: str, config, identity: str | None, name: str, keyed_name: str) -> list[_Problem]:
    """yamllint's problems in `text`, kept in the render cache (render_cache.py) by a hash of the text, the
    configuration and yamllint's version, so an unchanged file is not linted again on the next run."""
    from yamllint import linter

    def run() -> str:
        found = [[p.line, p.level, p.rule, p.desc] for p in linter.run(text, config, name)]
        return json.dumps(found)

    cache = render_cache.shared()
    if cache is None or identity is None:
        return [_Problem(*p) for p in json.loads(run())]
    key = hashlib.sha256(f"yamllint\0{identity}\0{keyed_name}\0{text}".encode()).hexdigest()
    return [_Problem(*p) for p in json.loads(cache.get_or_build(key, run))]


class Background:
    """lint() in a forked copy of this process, started at once (its modules are loaded already); `result`
    waits for it. Where forking is not safe (another thread is running, or not Linux) or the copy fails,
    lint runs here when the result is asked for, and reports what it finds the usual way."""

    def __init__(self, files: list[Path], root: Path):
        self.files, self.root = files, root
        self.pid = None
        if sys.platform != "linux" or threading.active_count() > 1:
            return
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): here, later
            os.close(read)
            os.close(write)
            return
        if pid == 0:
            os.close(read)
            _answer(write, files, root)  # never returns
        os.close(write)
        self.pid, self.pipe = pid, read

    def result(self, progress) -> list[Finding]:
        if self.pid is None:
            return lint(self.files, self.root, progress)
        chunks = []
        while chunk := os.read(self.pipe, 1 << 16):
            chunks.append(chunk)
        data = b"".join(chunks)
        os.close(self.pipe)
        self.pipe = -1
        os.waitpid(self.pid, 0)
        self.pid = None
        try:
            reply = json.loads(data)
        except ValueError:
            return lint(self.files, self.root, progress)  # the copy failed: here again, to report why
        if "error" in reply:
            raise InputError(reply["error"])
        for line in reply["progress"]:
            progress(line)
        return [
            YAML_LINT.finding(None, f["message"], severity=f["severity"], file=f["file"], line=f["line"])
            for f in reply["findings"]
        ]

    def stop(self) -> None:
        if self.pid is not None:
            with suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            if self.pipe >= 0:
                with suppress(OSError):
                    os.close(self.pipe)
            self.pid = None


def _answer(pipe: int, files: list[Path], root: Path) -> None:
    """The forked copy's work: lint, its findings (or its one-line error) as JSON into `pipe`, then exit
    without running anything the parent registered to run at exit."""
    code = 1
    try:
        lines: list[str] = []
        try:
            findings = lint(files, root, lines.append)
            found = [{"message": f.message, "severity": f.severity, "file": f.file, "line": f.line} for f in findings]
            reply = {"findings": found, "progress": lines}
        except InputError as error:
            reply = {"error": str(error)}
        with os.fdopen(pipe, "wb") as out:
            out.write(json.dumps(reply).encode())
        code = 0
    finally:
        os._exit(code)
