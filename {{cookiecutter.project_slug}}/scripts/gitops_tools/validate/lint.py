"""The lint stage: yamllint over the YAML sources, each file with the configuration of the repository it
lives in (found from the file's own location, never the current directory).

A file outside any repository made by the template is not held to a repository's style: only what
changes its meaning counts there (a syntax error, an input error; a duplicate key, whose later value
silently wins).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..model import relative
from ..rules.registry import Finding
from ..rules.stages import YAML_LINT
from .plan import find_root

CONFIG_FILES = (".yamllint", ".yamllint.yaml", ".yamllint.yml")
OUTSIDE_A_REPOSITORY = "rules:\n  key-duplicates: enable\n"


def _config(root: Path | None):
    """The repository's .yamllint (yamllint's default when it has none); outside a repository, duplicate keys
    only."""
    from yamllint.config import YamlLintConfig, YamlLintConfigError

    if root is None:
        return YamlLintConfig(OUTSIDE_A_REPOSITORY)
    config_file = next((root / n for n in CONFIG_FILES if (root / n).is_file()), None)
    try:
        return YamlLintConfig(file=str(config_file)) if config_file else YamlLintConfig("extends: default")
    except (YamlLintConfigError, OSError) as error:
        raise InputError(f"{config_file}: invalid yamllint configuration: {error}") from None


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
    from yamllint import linter

    configs: dict[Path | None, object] = {}
    findings, cache, checked = [], {}, 0
    for path in _unique(files):
        own = find_root(path.parent)
        if own not in configs:
            configs[own] = _config(own)
        config = configs[own]
        name = relative(path, root)
        inside = relative(path, own) if own else name  # what the repository's ignore patterns match
        if config.is_file_ignored(inside):
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{name}: cannot read: {getattr(error, 'strerror', None) or error}") from None
        checked += 1
        # Results depend on the text alone unless a rule ignores some paths; then on the name too.
        by_name = any(isinstance(c, dict) and c.get("ignore") for c in config.rules.values())
        key = (id(config), text, inside if by_name else "")
        if key not in cache:
            cache[key] = list(linter.run(text, config, inside))
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
