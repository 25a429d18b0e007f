"""validate's configuration file: rules turned off, a severity per rule (everywhere, for some files, for some
environments) and paths whose findings are not reported.

    # .eks-gpu-gitops.yaml, at the repository's root
    rules:                        # rule id -> error, warning or off
      placeholder-value: off
    overrides:                    # in order: a later setting that applies wins over an earlier one
      - environments: ["prod", "production", "prod-*"]    # globs on the environment's name
        files: ["overlays/**"]                             # gitignore patterns on the finding's file
        rules:
          image-tag-latest: error
    ignore:                       # gitignore patterns: no finding on these files is reported
      - examples/

Which file: `--config FILE`; otherwise the first of CONFIG_FILES found in the validated repository's root or
one of its parents, then in the current folder or one of its parents (as yamllint looks for its .yamllint: up
to the home folder or the file system's root). The repository being validated wins over wherever validate
runs, and CI runs from the root anyway. Its patterns match the file as the report names it: relative to the
repository's root (outside a repository, to the current folder).

The results cache knows nothing of this file: the configuration is applied to the settled result, after the
cache, so that every output format shows the same thing and the result's notes say what the file changed
(a pull request can change it to silence a rule). A file that is not exactly this shape is refused in one line
that names the file, the key and what is allowed, before anything is rendered.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..core import yaml_limits
from ..core.errors import InputError
from ..core.files import Unreadable, read_bounded
from ..model import relative
from ..rules.registry import REGISTRY
from . import lint
from .plan import Plan
from .runner import Reported, Result

CONFIG_FILES = (".eks-gpu-gitops.yaml", ".eks-gpu-gitops.yml")
LEVELS = ("error", "warning", "off")
_RANK = {"off": 0, "warning": 1, "error": 2}
KEYS = ("rules", "overrides", "ignore")
OVERRIDE_KEYS = ("files", "environments", "rules")

# A real configuration is a few dozen lines. Its path patterns are held to the shapes a .yamllint's are held to
# (lint._pattern_problem: matching time bounded), and a path longer than lint.MAX_PATH matches none of them.
MAX_CONFIG_BYTES = 64 << 10
MAX_PATTERNS = 200
MAX_SETTINGS = 1_000
# Environment names are DNS-1123 labels: a glob of them is made of the same characters, `*` and `?`.
_ENVIRONMENT_GLOB = re.compile(r"^[a-z0-9*?][a-z0-9*?.-]{0,62}$")


@dataclass
class Setting:
    """One rule's level, where it applies: every file and environment unless `files` or `environments` says."""

    rule: str
    level: str
    files: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    spec: object = field(default=None, repr=False, compare=False)  # pathspec of `files`

    def applies(self, finding: Reported, matches) -> bool:
        if finding.rule != self.rule:
            return False
        if self.files and not matches(self.spec, finding.file):
            return False
        if self.environments:
            return bool(finding.env) and any(fnmatch.fnmatchcase(finding.env, glob) for glob in self.environments)
        return True

    def where(self) -> str:
        scopes = [f"environments {', '.join(self.environments)}"] if self.environments else []
        scopes += [f"files {', '.join(self.files)}"] if self.files else []
        return f" [{'; '.join(scopes)}]" if scopes else ""


@dataclass
class Config:
    name: str  # the file, as the report's note names it
    settings: list[Setting] = field(default_factory=list)  # top-level rules first, then each override's
    ignore: tuple[str, ...] = ()
    ignored: object = field(default=None, repr=False)  # pathspec of `ignore`
    _matched: dict = field(default_factory=dict, repr=False)

    def _matches(self, spec, file: str) -> bool:
        if spec is None or not file or len(file) > lint.MAX_PATH:
            return False
        key = (id(spec), file)
        if key not in self._matched:
            self._matched[key] = spec.match_file(file)
        return self._matched[key]

    def ignores(self, file: str) -> bool:
        return self._matches(self.ignored, file)

    def level(self, finding: Reported) -> str | None:
        """The level this file gives the finding (the last setting that applies), None when none applies."""
        found = None
        for setting in self.settings:
            if setting.applies(finding, self._matches):
                found = setting.level
        return found

    def apply(self, result: Result) -> Result:
        """The result as this configuration has it, with a note (first) that says what it changed."""
        dropped = changed = 0
        kept: dict[str, list[Reported]] = {"findings": [], "skipped": []}
        for name, findings in (("findings", result.findings), ("skipped", result.skipped)):
            for finding in findings:
                level = "off" if self.ignores(finding.file) else self.level(finding)
                if level == "off":
                    dropped += 1
                    continue
                if level is not None and level != finding.severity:
                    finding = replace(finding, severity=level)
                    changed += 1
                kept[name].append(finding)
        return replace(result, **kept, notes=[self.note(dropped, changed), *result.notes])

    def narrow(self, chosen: Plan) -> Plan:
        """What validate reads, without the ignored files: they are not linted, and outside a repository not
        loaded either (a repository's environments are rendered as Flux renders them, ignored files included)."""

        def kept(path: Path, folder: bool = False) -> bool:
            return not self.ignores(relative(path, chosen.root) + ("/" if folder else ""))

        sources = [path for path in chosen.sources if kept(path)]
        if chosen.repository:
            return replace(chosen, sources=sources)
        builds = [path for path in chosen.builds if kept(path, folder=True)]
        files = [path for path in chosen.files if kept(path)]
        if not builds and not files:
            raise InputError(f"{self.name}: its ignore patterns leave nothing of the paths given to validate")
        return replace(chosen, builds=builds, files=files, sources=sources)

    def note(self, dropped: int, changed: int) -> str:
        groups: dict[str, list[str]] = {"off": [], "raised": [], "lowered": []}
        for setting in self.settings:
            catalogue = _RANK[REGISTRY[setting.rule].severity]
            if setting.level == "off":
                groups["off"].append(setting.rule + setting.where())
            elif _RANK[setting.level] != catalogue:
                groups["raised" if _RANK[setting.level] > catalogue else "lowered"].append(
                    f"{setting.rule} to {setting.level}{setting.where()}"
                )
        parts = [f"{_count(len(items), 'rule')} {what} ({', '.join(items)})" for what, items in groups.items() if items]
        if self.ignore:
            parts.append(f"{_count(len(self.ignore), 'path')} ignored ({', '.join(self.ignore)})")
        return (
            f"configuration {self.name}: {'; '.join(parts) or 'no rule or path changed'}; in this run "
            f"{_count(dropped, 'finding')} not reported, {changed} with another severity"
        )


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'' if number == 1 else 's'}"


def _upwards(start: Path):
    """`start` and its parents, up to the home folder or the file system's root (yamllint's search)."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no password entry: up to the root
        home = None
    folder = start.resolve()
    while True:
        yield folder
        if folder == home or folder.parent == folder:
            return
        folder = folder.parent


def find(explicit: Path | None, root: Path, cwd: Path | None = None) -> Path | None:
    """The configuration file: `explicit`, else the first found from the repository's root upwards, else from the
    current folder upwards; None when there is none."""
    if explicit is not None:
        return explicit
    for start in (root, cwd or Path.cwd()):
        for folder in _upwards(start):
            for name in CONFIG_FILES:
                if (folder / name).is_file():
                    return folder / name
    return None


def load(path: Path, root: Path) -> Config:
    """The configuration in `path` (InputError, one line, when it is not exactly the shape the docs give)."""
    from .. import rules  # noqa: F401  (importing rules registers the catalogue the rule ids are checked against)

    name = relative(path, root)
    try:
        text = read_bounded(path, MAX_CONFIG_BYTES, follow_links=True).decode()
    except Unreadable as error:
        raise InputError(f"{name}: cannot read the configuration: {error}") from None
    except UnicodeDecodeError:
        raise InputError(f"{name}: the configuration is not UTF-8 text") from None
    try:
        document = yaml_limits.load(text, _UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise InputError(f"{name}: not YAML: {' '.join(str(error).split())}") from None
    return _parsed(document, name)


class _UniqueKeyLoader(yaml_limits.LOADER):
    """A loader that refuses a key given twice in one mapping (where PyYAML keeps the last silently, a reviewer
    would read the first)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):  # a list or mapping as a key: the shape checks name it in one line
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _refuse(name: str, key: str, why: str):
    raise InputError(f"{name}: {key}: {why}")


def _shown(value) -> str:
    return repr(value if not isinstance(value, str) else value[:80])


def _mapping(name: str, key: str, value, allowed: tuple[str, ...]) -> dict:
    """`value` when it is a mapping of only `allowed` keys (`key`: where it is, "" for the whole file)."""
    if not isinstance(value, dict):
        _refuse(name, key or "the file", f"expected a mapping of {', '.join(allowed)}, not {type(value).__name__}")
    for unknown in value:
        if unknown not in allowed:
            _refuse(name, _key(key, unknown), f"unknown key; allowed: {', '.join(allowed)}")
    return value


def _key(parent: str, key) -> str:
    """A key as a refusal names it: its place and at most 80 characters of it, without control characters."""
    shown = str(key)[:80].encode("unicode_escape").decode("ascii")
    return f"{parent}.{shown}" if parent else shown


def _parsed(document, name: str) -> Config:
    config = Config(name)
    if document is None:  # an empty file: nothing changes
        return config
    document = _mapping(name, "", document, KEYS)
    config.settings = _rules(name, "rules", document.get("rules") or {})
    overrides = document.get("overrides") or []
    if not isinstance(overrides, list):
        _refuse(name, "overrides", "expected a list of mappings with files, environments and rules")
    for index, override in enumerate(overrides):
        key = f"overrides[{index}]"
        override = _mapping(name, key, override, OVERRIDE_KEYS)
        if "rules" not in override or not ({"files", "environments"} & set(override)):
            _refuse(name, key, "needs rules, and files or environments (or both) to say where they apply")
        files = _strings(name, f"{key}.files", override.get("files", []))
        environments = _strings(name, f"{key}.environments", override.get("environments", []))
        for position, glob in enumerate(environments):
            if not _ENVIRONMENT_GLOB.match(glob):
                _refuse(
                    name,
                    f"{key}.environments[{position}]",
                    f"{_shown(glob)} is not a glob of environment names (lower-case letters, digits, '-', '.', "
                    "'*' and '?', at most 63)",
                )
        spec = _spec(name, f"{key}.files", files) if files else None
        for setting in _rules(name, f"{key}.rules", override["rules"]):
            config.settings.append(replace(setting, files=tuple(files), environments=tuple(environments), spec=spec))
    ignore = _strings(name, "ignore", document.get("ignore") or [])
    config.ignore = tuple(ignore)
    config.ignored = _spec(name, "ignore", ignore) if ignore else None
    patterns = len(ignore) + sum(len(s.files) for s in config.settings)
    if patterns > MAX_PATTERNS or len(config.settings) > MAX_SETTINGS:
        _refuse(name, "the file", f"more than {MAX_PATTERNS} path patterns or {MAX_SETTINGS:,} settings")
    return config


def _rules(name: str, key: str, value) -> list[Setting]:
    if not isinstance(value, dict) or (not value and key != "rules"):
        _refuse(name, key, f"expected a mapping of rule ids to {', '.join(LEVELS)}")
    settings = []
    for rule_id, level in value.items():
        where = _key(key, rule_id)
        if rule_id not in REGISTRY:
            close = difflib.get_close_matches(str(rule_id), REGISTRY, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            _refuse(name, where, f"unknown rule; {hint}`validate --list-rules` lists them")
        level = "off" if level is False else level  # YAML 1.1 reads a bare `off` as false
        if level not in LEVELS:
            _refuse(name, where, f"{_shown(level)} is not a level; allowed: {', '.join(LEVELS)}")
        rule = REGISTRY[rule_id]
        if _RANK[level] < _RANK[rule.severity] and (not rule.suppressible or rule.stage == "runner"):
            _refuse(name, where, f"cannot be lowered or turned off (it says {_UNLOWERABLE[rule.stage == 'runner']})")
        settings.append(Setting(rule_id, level))
    return settings


_UNLOWERABLE = {
    True: "that a rule could not finish, so passing it would claim what nobody checked",
    False: "that a suppression is not valid; no annotation can hide it either",
}


def _strings(name: str, key: str, value) -> list[str]:
    """A list of strings (a string alone is a list of its lines, as in a .yamllint's ignore), blank lines and
    comments left out."""
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        _refuse(name, key, "expected a list of strings")
    return [item.strip() for item in value if item.strip() and not item.lstrip().startswith("#")]


def _spec(name: str, key: str, patterns: list[str]):
    from pathspec import GitIgnoreSpec

    for index, pattern in enumerate(patterns):
        why = lint._pattern_problem(pattern)
        if why:
            _refuse(name, f"{key}[{index}]", f"pattern {_shown(pattern)}: {why}")
    return GitIgnoreSpec.from_lines(patterns)


def configured(explicit: Path | None, root: Path) -> Config | None:
    """The configuration that applies to a run over `root` (see find), loaded; None when there is none."""
    path = find(explicit, root)
    return load(path, root) if path is not None else None
