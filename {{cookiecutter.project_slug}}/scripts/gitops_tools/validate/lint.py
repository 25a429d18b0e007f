"""The lint stage: yamllint over the YAML sources with the repository's configuration."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..model import relative
from ..rules.registry import Finding
from ..rules.stages import YAML_LINT

CONFIG_FILES = (".yamllint", ".yamllint.yaml", ".yamllint.yml")


def _config(root: Path):
    """The repository's .yamllint, else yamllint's default."""
    from yamllint.config import YamlLintConfig, YamlLintConfigError

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
    """yamllint findings; a file that is not YAML at all is an input error."""
    from yamllint import linter

    config = _config(root)
    # Results depend on the text alone unless a rule ignores some paths; then on the name too.
    by_name = any(isinstance(c, dict) and c.get("ignore") for c in config.rules.values())
    findings, cache, checked = [], {}, 0
    for path in _unique(files):
        name = relative(path, root)
        if config.is_file_ignored(name):
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{name}: cannot read: {getattr(error, 'strerror', None) or error}") from None
        checked += 1
        key = (text, name if by_name else "")
        if key not in cache:
            cache[key] = list(linter.run(text, config, name))
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
