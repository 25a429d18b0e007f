"""The lint stage: yamllint over the YAML sources, each file with the configuration of the repository it
lives in (found from the file's own location, never the current directory).

A file outside any repository made by the template is not held to a repository's style: only what
changes its meaning counts there (a syntax error, an input error; a duplicate key, whose later value
silently wins).

yamllint is pure Python: validate runs it in a forked copy of itself (`Background`), so that it does not
hold the interpreter's lock while the load stage renders.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError
from ..core.files import LIMIT, read_regular
from ..model import relative
from ..render import render_cache
from ..rules.registry import Finding
from ..rules.stages import YAML_LINT
from .plan import find_root

CONFIG_FILES = (".yamllint", ".yamllint.yaml", ".yamllint.yml")
OUTSIDE_A_REPOSITORY = "rules:\n  key-duplicates: enable\n"


def _config(root: Path | None):
    """The repository's .yamllint (yamllint's default when it has none); outside a repository, duplicate keys
    only. With what identifies it for the lint cache: yamllint's version and the configuration's text."""
    import yamllint
    from yamllint.config import YamlLintConfig, YamlLintConfigError

    if root is None:
        return YamlLintConfig(OUTSIDE_A_REPOSITORY), f"{yamllint.__version__}\0{OUTSIDE_A_REPOSITORY}"
    config_file = next((root / n for n in CONFIG_FILES if (root / n).is_file()), None)
    try:
        if config_file is None:
            return YamlLintConfig("extends: default"), f"{yamllint.__version__}\0extends: default"
        config = YamlLintConfig(file=str(config_file))
        text = config_file.read_text()
    except (YamlLintConfigError, OSError, UnicodeDecodeError) as error:
        raise InputError(f"{config_file}: invalid yamllint configuration: {error}") from None
    # A configuration that extends another file than yamllint's own has no identity of its own here.
    plain = all(
        line.split(":", 1)[-1].strip() in ("default", "relaxed")
        for line in text.splitlines()
        if line.startswith("extends:")
    )
    return config, f"{yamllint.__version__}\0{text}" if plain else None


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
    an input error."""
    configs: dict[Path | None, object] = {}
    findings, cache, checked = [], {}, 0
    for path in _unique(files):
        own = find_root(path.parent)
        if own not in configs:
            configs[own] = _config(own)
        config, identity = configs[own]
        name = relative(path, root)
        inside = relative(path, own) if own else name  # what the repository's ignore patterns match
        if config.is_file_ignored(inside):
            continue
        data = read_regular(path)  # never a FIFO, a device or a file of gigabytes
        if data is None:
            raise InputError(f"{name}: cannot read: not a regular file of at most {LIMIT >> 20} MiB")
        try:
            text = data.decode()
        except UnicodeDecodeError as error:
            raise InputError(f"{name}: cannot read: {error}") from None
        checked += 1
        # Results depend on the text alone unless a rule ignores some paths; then on the name too.
        by_name = any(isinstance(c, dict) and c.get("ignore") for c in config.rules.values())
        key = (id(config), text, inside if by_name else "")
        if key not in cache:
            cache[key] = _problems(text, config, identity, inside, key[2])
        for problem in cache[key]:
            if problem.rule is None:  # yamllint reports a parse failure as a rule-less error
                raise InputError(f"{name}:{problem.line}: invalid YAML: {problem.desc.removeprefix('syntax error: ')}")
            findings.append(
                YAML_LINT.finding(
                    None, f"{problem.desc} ({problem.rule})", severity=problem.level, file=name, line=problem.line
                )
            )
    progress(f"yamllint: {checked} files, {len(findings)} problems")
    return findings


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
