"""Find the source line of a field of a rendered object, for reports and GitHub annotations.

A rendered object has no line numbers: kustomize merged it from a base resource, the patches of
each overlay and the values replacements copied in (an environment's settings.yaml, through the
bases' environment components). `Locator.locate` walks the kustomization tree the object was
built from (the overlay's replacements and patches first, then its resources, components and
bases), finds every document, JSON patch operation or replacement that is about that object,
and picks the one that reaches deepest into the field path; ties go to the most specific file.
For plain files it looks up the document itself. Only findings are located, so the cost is per
finding, with every file parsed once. Nothing here raises: an unknown location is (file, 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..core import yaml_limits
from ..core.files import Unreadable, read_bounded
from ..model import Manifest

_KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


@dataclass
class _Candidate:
    file: Path
    node: yaml.Node  # a document (mapping) or one JSON patch operation
    line_offset: int = 0  # for patches written inline in kustomization.yaml
    target: dict | None = None
    json_patch: bool = False
    resource: bool = False  # a resource definition, not a patch
    # A replacement's source value (node): the objects and fields it is copied to, as
    # (select, [fieldPath steps, ...]) pairs.
    copies: list = field(default_factory=list)


def _text(file: Path) -> str:
    """A file the locator reads, bounded as every YAML input is (core/files.read_bounded): a FIFO, a device or a
    file past yaml_limits.MAX_FILE_BYTES is Unreadable, and the finding keeps no line."""
    return read_bounded(file, yaml_limits.MAX_FILE_BYTES, follow_links=True).decode()


def _scalar(node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _get(node, key: str):
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if _scalar(key_node) == key:
                return key_node, value_node
    return None


def _walk(node, path: tuple) -> tuple[int, int]:
    """(how many path steps exist in node, 0-based line of the deepest one)."""
    line, depth = node.start_mark.line, 0
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = _get(node, str(step))
            if found is None:
                break
            line, node = found[0].start_mark.line, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line
        else:
            break
        depth += 1
    return depth, line


def _pointer(text: str) -> tuple:
    steps = []
    for part in text.strip("/").split("/") if text.strip("/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        steps.append(int(part) if _INDEX.match(part) else part)
    return tuple(steps)


_SEGMENT = re.compile(r"\[[^\]]*\]|[^.\[]+")
# A list index: ASCII digits only (str.isdigit() takes "²", which int() refuses), and few of them.
_INDEX = re.compile(r"^[0-9]{1,18}$")


def _field_path(text: str) -> tuple:
    """A kustomize fieldPath ("spec.containers.[name=worker].image") split into steps."""
    return tuple(_SEGMENT.findall(str(text)))


def _resolve(doc, steps: tuple, done: tuple = ()) -> list[tuple]:
    """Every concrete path (keys and list indices) that `steps` names in `doc`."""
    if not steps:
        return [done]
    step, rest = steps[0], steps[1:]
    if isinstance(doc, list):
        if step == "*":
            indices = range(len(doc))
        elif step.startswith("[") and "=" in step:
            key, _, value = step[1:-1].partition("=")
            indices = [i for i, item in enumerate(doc) if isinstance(item, dict) and str(item.get(key)) == value]
        elif _INDEX.match(step):
            indices = [int(step)] if int(step) < len(doc) else []
        else:
            return []
        return [found for i in indices for found in _resolve(doc[i], rest, (*done, i))]
    if isinstance(doc, dict) and step in doc:
        return _resolve(doc[step], rest, (*done, step))
    return []


def _identity(node) -> tuple[str, str]:
    kind = _scalar((_get(node, "kind") or (None, None))[1]) or ""
    metadata = (_get(node, "metadata") or (None, None))[1]
    name = _scalar((_get(metadata, "name") or (None, None))[1]) if metadata is not None else None
    return kind, name or ""


class Locator:
    def __init__(self, root: Path):
        self.root = root
        self._documents: dict[Path, list] = {}
        self._trees: dict[Path, list[_Candidate]] = {}

    def locate(self, manifest: Manifest | None, path: tuple = ()) -> tuple[str, int]:
        if manifest is None:
            return "", 0
        try:
            return self._locate(manifest, tuple(path))
        except Exception:  # a report must not fail because a source could not be re-read
            return manifest.file, 0

    def _locate(self, manifest: Manifest, path: tuple) -> tuple[str, int]:
        origin = Path(manifest.file)
        origin = origin if origin.is_absolute() else self.root / origin
        if origin.is_file():
            for node in self._parse(origin):
                if _identity(node) == (manifest.kind, manifest.name):
                    return manifest.file, _walk(node, path)[1] + 1
            return manifest.file, 0
        if origin.is_dir():
            best = None  # (score, candidate order, file, line)
            for order, candidate in enumerate(self._tree(origin)):
                scored = self._score(candidate, manifest, path)
                if scored is None:
                    continue
                depth, line = scored
                # Deeper wins; at depth 0 (the object as a whole) a resource beats a patch;
                # otherwise the most specific (earliest) file wins.
                score = (depth, 1 if depth == 0 and candidate.resource else 0)
                if best is None or score > best[0]:
                    best = (score, order, candidate.file, line + candidate.line_offset)
            if best is not None:
                return self._relative(best[2]), best[3] + 1
            kustomization = next((origin / n for n in _KUSTOMIZATION_FILES if (origin / n).is_file()), origin)
            return self._relative(kustomization), 1 if kustomization.is_file() else 0
        return manifest.file, 0

    def _relative(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)

    @staticmethod
    def _targets(target: dict | None, manifest: Manifest) -> bool:
        if not target:
            return True
        return all(
            not target.get(key) or str(target[key]) == value
            for key, value in (("kind", manifest.kind), ("name", manifest.name))
        )

    def _score(self, candidate: _Candidate, manifest: Manifest, path: tuple):
        if candidate.copies:
            return self._score_copy(candidate, manifest, path)
        if candidate.json_patch:
            if not self._targets(candidate.target, manifest):
                return None
            found = _get(candidate.node, "path")
            if found is None:
                return None
            pointer = _pointer(_scalar(found[1]) or "")
            steps = tuple(map(str, pointer))
            wanted = tuple(map(str, path))
            if wanted[: len(steps)] == steps:
                value = _get(candidate.node, "value")
                if value is None:
                    return len(steps), found[0].start_mark.line
                depth, line = _walk(value[1], path[len(steps) :])
                return len(steps) + depth, line
            if steps[: len(wanted)] == wanted:
                return len(wanted), found[0].start_mark.line
            return None
        kind, name = _identity(candidate.node)
        if (kind, name) != (manifest.kind, manifest.name) and not (
            candidate.target and kind == manifest.kind and self._targets(candidate.target, manifest)
        ):
            return None
        return _walk(candidate.node, path)

    def _score_copy(self, candidate: _Candidate, manifest: Manifest, path: tuple):
        """A replacement's value: deepest where a target field of the object is on the finding's path."""
        best = None
        wanted = tuple(map(str, path))
        for select, field_paths in candidate.copies:
            if not self._targets(select, manifest):
                continue
            for steps in field_paths:
                for target in _resolve(manifest.doc, steps):
                    have = tuple(map(str, target))
                    if wanted[: len(have)] == have:
                        depth, line = _walk(candidate.node, path[len(have) :])
                        scored = (len(have) + depth, line)
                    elif have[: len(wanted)] == wanted:
                        scored = (len(wanted), candidate.node.start_mark.line)
                    else:
                        continue
                    best = scored if best is None or scored[0] > best[0] else best
        return best

    def _parse(self, file: Path) -> list:
        if file not in self._documents:
            try:
                nodes = yaml_limits.compose_all(_text(file))
            except (OSError, Unreadable, yaml.YAMLError, UnicodeDecodeError):
                nodes = []
            self._documents[file] = [n for n in nodes if n is not None]
        return self._documents[file]

    def _tree(self, folder: Path, seen: frozenset = frozenset()) -> list[_Candidate]:
        folder = folder.resolve()
        if folder in self._trees:
            return self._trees[folder]
        if folder in seen:
            return []
        file = next((folder / n for n in _KUSTOMIZATION_FILES if (folder / n).is_file()), None)
        documents = self._parse(file) if file else []
        config = self._config(folder) if documents else None
        if not isinstance(config, dict):
            self._trees[folder] = []
            return []
        patches, resources, nested, components = [], [], [], []
        inline_nodes = (_get(documents[0], "patches") or (None, None))[1]
        for index, entry in enumerate(config.get("patches") or []):
            if not isinstance(entry, dict):
                continue
            if entry.get("path"):
                patches.extend(self._patch_file(folder / str(entry["path"]), entry.get("target")))
            elif entry.get("patch") and isinstance(inline_nodes, yaml.SequenceNode) and index < len(inline_nodes.value):
                text_node = (_get(inline_nodes.value[index], "patch") or (None, None))[1]
                if text_node is not None:
                    offset = text_node.start_mark.line + (1 if text_node.style in ("|", ">") else 0)
                    patches.extend(self._patch_text(file, str(entry["patch"]), entry.get("target"), offset))
        for entry in config.get("patchesStrategicMerge") or []:
            if isinstance(entry, str) and "\n" not in entry:
                patches.extend(self._patch_file(folder / entry, None))
        for entry in config.get("patchesJson6902") or []:
            if isinstance(entry, dict) and entry.get("path"):
                patches.extend(self._patch_file(folder / str(entry["path"]), entry.get("target")))
        for entry in [
            *(config.get("resources") or []),
            *(config.get("bases") or []),
            *(config.get("components") or []),
        ]:
            if not isinstance(entry, str) or "://" in entry or entry.startswith(("github.com/", "git@")):
                continue
            target = folder / entry
            if target.is_dir():
                nested.append(target)
                if entry in (config.get("components") or []):
                    components.append(target)
            elif target.is_file():
                resources.extend(
                    _Candidate(target, node, resource=True)
                    for node in self._parse(target)
                    if isinstance(node, yaml.MappingNode)
                )
        found = patches + resources
        for child in nested:
            found.extend(self._tree(child, seen | {folder}))
        # Replacements here and in the components act on everything gathered so far.
        replacements = self._replacements(folder, config)
        for component in components:
            replacements += self._replacements(component, self._config(component))
        copies = [c for r in replacements if (c := self._copy(r, found)) is not None]
        self._trees[folder] = copies + found
        return self._trees[folder]

    def _config(self, folder: Path) -> dict:
        file = next((folder / n for n in _KUSTOMIZATION_FILES if (folder / n).is_file()), None)
        try:
            config = yaml_limits.load(_text(file)) if file else None
        except (OSError, Unreadable, yaml.YAMLError, UnicodeDecodeError):
            config = None
        return config if isinstance(config, dict) else {}

    def _replacements(self, folder: Path, config: dict) -> list[dict]:
        found = []
        for entry in config.get("replacements") or []:
            if isinstance(entry, dict) and entry.get("path"):
                try:
                    loaded = yaml_limits.load(_text(folder / str(entry["path"])))
                except (OSError, Unreadable, yaml.YAMLError, UnicodeDecodeError):
                    continue
                found.extend(loaded if isinstance(loaded, list) else [loaded])
            elif isinstance(entry, dict):
                found.append(entry)
        return [r for r in found if isinstance(r, dict) and isinstance(r.get("source"), dict)]

    def _copy(self, replacement: dict, candidates: list[_Candidate]) -> _Candidate | None:
        """The replacement's source value as a candidate for the fields it is copied to."""
        source = replacement["source"]
        for candidate in candidates:
            if not candidate.resource:
                continue
            kind, name = _identity(candidate.node)
            if kind != source.get("kind") or (source.get("name") and name != source["name"]):
                continue
            node = candidate.node
            for step in _field_path(source.get("fieldPath") or "metadata.name"):
                found = _get(node, step)
                if found is None:
                    return None
                node = found[1]
            copies = [
                (target.get("select") or {}, [_field_path(p) for p in target.get("fieldPaths") or []])
                for target in replacement.get("targets") or []
                if isinstance(target, dict)
            ]
            return _Candidate(candidate.file, node, copies=copies)
        return None

    def _patch_nodes(self, file: Path, nodes: list, target, offset: int) -> list[_Candidate]:
        found = []
        for node in nodes:
            if isinstance(node, yaml.SequenceNode):  # a JSON 6902 patch: one candidate per operation
                found.extend(
                    _Candidate(file, op, offset, target, json_patch=True)
                    for op in node.value
                    if isinstance(op, yaml.MappingNode)
                )
            elif isinstance(node, yaml.MappingNode):
                found.append(_Candidate(file, node, offset, target))
        return found

    def _patch_file(self, file: Path, target) -> list[_Candidate]:
        return self._patch_nodes(file, self._parse(file), target, 0) if file.is_file() else []

    def _patch_text(self, file: Path, text: str, target, offset: int) -> list[_Candidate]:
        try:
            nodes = [n for n in yaml_limits.compose_all(text) if n is not None]
        except yaml.YAMLError:
            return []
        return self._patch_nodes(file, nodes, target, offset)
