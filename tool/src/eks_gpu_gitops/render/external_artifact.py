"""What an ExternalArtifact holds when an ArtifactGenerator makes it from this repository, so that a Flux
Kustomization whose sourceRef names it builds from the same files on the cluster and here.

source-watcher v2.2.4 (Flux v2.9.5; the code below is read at v2.2.1, internal/builder/builder.go and
internal/controller/artifactgenerator_pathpattern.go, whose API v2.2.4 keeps) fetches each source of the generator
(here only this repository's GitRepository, whose artifact is the render's workspace), then for each spec.artifacts
entry applies its copy operations, in order, into an empty folder:

- `from: "@<alias>/<pattern>"`, `to: "@artifact/<path>"`;
- a pattern without `*?[]` names one file or folder: a file goes to <path> (into it when <path> ends with `/` or is
  a folder already), a folder to <path>/<its name>, with everything below it (cp -r);
- any other pattern is matched with Go's fs.Glob (path.Match per segment: `**` is `*`, one segment); each match goes
  to <path>/<match>, or for a pattern ending with `/**` to <path>/<match less that prefix>, a folder with
  everything below it. A pattern that matches nothing fails the generator;
- `exclude` patterns (doublestar: `**` is any number of segments) skip a match, or a path below a copied folder,
  matched against its path in the source and below the pattern's literal prefix, and a pattern without `/`
  against its file name too;
- strategy Merge merges YAML into a file an earlier operation wrote, and Extract unpacks tarballs: neither is done
  here (the artifact is not rendered, and validate says so).
With spec.pathPattern (`@<alias>/<pattern>` with `{capture}`s), every folder of the source the pattern matches
makes one artifact, its name and copy paths filled in from the captures (names lower-cased). The folder is then
archived with source-controller's default ignore rules (fluxcd/pkg artifact SourceIgnoreFilter(nil, nil): the VCS
and default patterns, whatever `.sourceignore` it holds).

Bounded work: source-watcher bounds neither the copy operations of an artifact nor what they copy, and each may
copy the whole repository; here an artifact past a bound below is not staged (a note says so), and a glob is matched
a segment at a time (no recursion).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..core import interrupts
from ..model import mapping, sequence
from ..model.flux_sources import BOOTSTRAP_SOURCE, Output
from .flux_source import ArtifactFilter, go_matcher

_GLOB_CHARS = "*?[]"
_GO_META = "*?[\\"  # io/fs glob.go hasMeta
_CAPTURE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The ArtifactGenerator CRD's MaxLength of spec.pathPattern and of a copy operation's from and to (source-watcher
# v2.2.1 api/v1beta1/artifactgenerator_types.go): the API server refuses a generator with a longer one.
MAX_PATTERN_LENGTH = 1024
# Copy operations per artifact. The CRD sets no maximum (copy: MinItems=1 only), and each operation may copy the
# whole repository; the examples of its specification (docs/spec/v1beta1/artifactgenerators.md) have one to three.
MAX_COPY_OPERATIONS = 100
# Files and bytes one artifact may hold as staged (files overwritten count each time). A repository of manifests is a
# few thousand files and a few MB; an artifact is part of it.
MAX_ARTIFACT_FILES = 20_000
MAX_ARTIFACT_BYTES = 256 << 20
# Files and bytes every artifact of one render may hold together: each stays on disk until the render ends, and a
# generator makes up to 1,000 artifacts (the CRD's MaxItems of spec.artifacts), every environment its own.
MAX_STAGED_FILES = 100_000
MAX_STAGED_BYTES = 1 << 30


class Unstaged(Exception):
    """Why an ExternalArtifact is not made here: a source that is not this repository, a strategy not modelled,
    a generator that fails, or one past a bound of staging. `probes` are the reads of the repository that decided
    it (render_cache kinds), so that a render of the environment is redone once they change."""

    def __init__(self, message: str):
        super().__init__(message)
        self.probes: set[tuple[str, str]] = set()


class Budget:
    """What the staging of one render has copied so far, against MAX_STAGED_FILES and MAX_STAGED_BYTES."""

    def __init__(self):
        self.files = 0
        self.bytes = 0


@dataclass
class Staged:
    """An ExternalArtifact's files in a folder of their own, and what of the repository they were made from
    (the render cache's reads, observed on the workspace: (kind, path))."""

    path: Path
    describe: str  # "ExternalArtifact ns/name (ArtifactGenerator name)": see describe()
    probes: set[tuple[str, str]] = field(default_factory=set)
    # A file or folder of the artifact -> its path in the repository.
    origins: dict[str, str] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0

    def left_out(self, relative: str) -> str:
        return ""

    def origin(self, relative: str) -> str:
        """Where a path of the artifact (a built object's file or folder) comes from in the repository."""
        path = os.path.normpath(relative)
        if path in self.origins:
            return self.origins[path]
        for copied, source in self.origins.items():  # a folder: from what its files were copied from
            below = copied.removeprefix(path + "/")
            if below != copied and source.endswith("/" + below):
                return source[: -len(below) - 1]
        return relative

    def close(self) -> None:
        if self.path.name.startswith("gitops-artifact-"):
            interrupts.remove(self.path)


def identity(output: Output, name: str) -> str:
    """What a staged artifact depends on besides the workspace: the generator's namespace and spec, the sources its
    aliases resolve to (an alias without a namespace names a source of the generator's namespace) and the
    artifact's name."""
    spec = mapping(output.generator.doc, "spec")
    sources = sorted((alias, list(reference.key)) for alias, reference in output.sources().items())
    record = [output.namespace, sources, spec, name]
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def describe(output: Output, name: str) -> str:
    return f"ExternalArtifact {output.namespace}/{name} (ArtifactGenerator {output.generator.name})"


def stage(output: Output, name: str, workspace: Path, budget: Budget | None = None) -> Staged:
    """ExternalArtifact `name` of `output`, made from the workspace (this repository's GitRepository artifact),
    within the render's `budget`. Unstaged, with the reads that decided it, when it is not made here."""
    probes: set[tuple[str, str]] = set()
    try:
        return _stage(output, name, workspace, budget or Budget(), probes)
    except Unstaged as why:
        why.probes = probes
        raise


def _stage(output: Output, name: str, workspace: Path, budget: Budget, probes: set) -> Staged:
    generator = output.generator
    where = f"{generator.file}: ArtifactGenerator {output.namespace}/{generator.name}"
    operations = _operations(output, name, workspace, probes)
    if len(operations) > MAX_COPY_OPERATIONS:
        raise Unstaged(
            f"it has {len(operations)} copy operations, more than the {MAX_COPY_OPERATIONS} staged here; it is not "
            "rendered here"
        )
    folder = interrupts.temporary_folder("gitops-artifact-")
    staged = Staged(folder, describe(output, name), probes)
    local = _local_aliases(output)
    try:
        for operation in operations:
            _Copy(operation, workspace, staged, budget, where).run(output, local)
        _drop_ignored(folder)
    except OSError as error:  # a file copied onto a folder an earlier operation made, or the other way round
        staged.close()
        raise Unstaged(f"copying fails ({error.strerror or error}); the generator fails") from None
    except BaseException:
        staged.close()
        raise
    return staged


def _local_aliases(output: Output) -> set[str]:
    return {alias for alias, reference in output.sources().items() if reference.key == BOOTSTRAP_SOURCE}


def _operations(output: Output, name: str, workspace: Path, probes: set) -> list[dict]:
    """The copy operations of the artifact `name`, with spec.pathPattern's captures filled in (the folders walked
    to find them are among `probes`)."""
    spec = mapping(output.generator.doc, "spec")
    pattern = str(spec.get("pathPattern") or "")
    copies = [c for c in sequence(output.artifact, "copy") if isinstance(c, dict)]
    fields = [("pathPattern", pattern)]
    for copy in copies:
        fields += [("copy source", str(copy.get("from", ""))), ("copy destination", str(copy.get("to", "")))]
    for what, value in fields:
        if len(value) > MAX_PATTERN_LENGTH:
            raise Unstaged(
                f"its {what} is longer than the {MAX_PATTERN_LENGTH} characters the ArtifactGenerator CRD "
                "allows; the API server refuses the generator"
            )
    if not pattern:
        return copies
    alias, _, rest = pattern.removeprefix("@").partition("/")
    if alias not in _local_aliases(output):
        raise Unstaged(f"its pathPattern reads source {alias!r}, which is not this repository")
    matcher = _path_pattern(rest, pattern)
    for folder in _folders(workspace, rest, probes):
        found = matcher.match(folder)
        if found is None:
            continue
        raw = found.groupdict()
        if _fill(str(output.artifact.get("name", "")), {k: v.lower() for k, v in raw.items()}) == name:
            return [_filled(c, raw) for c in copies]
    raise Unstaged(f"no folder of the repository matches pathPattern {pattern!r} for artifact {name!r}")


def _path_pattern(rest: str, pattern: str) -> re.Pattern:
    """pathPattern as a regular expression over folder paths; at most one capture per segment, which keeps the
    match linear (source-watcher's RE2 is; Python's would backtrack over captures side by side)."""
    parts = []
    for segment in rest.split("/"):
        captures = list(_CAPTURE.finditer(segment))
        left = _CAPTURE.sub("", segment)
        if len(captures) > 1 or "{" in left or "}" in left:
            raise Unstaged(f"its pathPattern {pattern!r} is not rendered here (one capture per folder at most)")
        if not captures:
            parts.append(re.escape(segment))
            continue
        found = captures[0]
        capture = f"(?P<{found.group(1)}>[^/]+)"
        parts.append(re.escape(segment[: found.start()]) + capture + re.escape(segment[found.end() :]))
    try:
        return re.compile("^" + "/".join(parts) + "$")
    except re.error as error:
        raise Unstaged(f"its pathPattern {pattern!r} is not rendered here ({error})") from None


def _filled(operation: dict, raw: dict[str, str]) -> dict:
    """A copy operation with pathPattern's captures, as found (not lower-cased), in its paths."""
    return {
        **operation,
        "from": _fill(str(operation.get("from", "")), raw),
        "to": _fill(str(operation.get("to", "")), raw),
    }


def _fill(template: str, values: dict[str, str]) -> str:
    return _CAPTURE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _folders(root: Path, pattern: str, probes: set) -> list[str]:
    """The folders below `root` that pathPattern `pattern` may match (as / separated paths, sorted): those below its
    literal folders before the first capture (the pattern is matched against whole paths, so no other can match).
    The walk is recorded as a read of that folder's tree."""
    parts = pattern.split("/")
    literal = []
    for part in parts[:-1]:
        if "{" in part:
            break
        literal.append(part)
    if any(part in ("", ".", "..") for part in literal):
        return []  # a walk's paths have no such segment: nothing matches
    base = "/".join(literal) or "."
    probes.add(("tree", base))
    found = []
    for current, folders, _ in _walk(root / base):
        here = Path(current)
        found += [(here / name).relative_to(root).as_posix() for name in folders]
    return sorted(found)


def _walk(root: Path):
    """os.walk(root) top-down, folders and files sorted by name, without recursion (Python 3.11's os.walk recurses
    once per level); a folder that cannot be read is skipped."""
    stack = [str(root)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        yield current, folders, files  # the caller may remove folders, which are then not walked
        stack.extend(os.path.join(current, name) for name in reversed(folders))


def _drop_ignored(folder: Path) -> None:
    matcher = ArtifactFilter.defaults()
    for current, folders, files in _walk(folder):
        here = Path(current)
        for name in list(folders):
            if matcher.why((here / name).relative_to(folder).as_posix(), folder=True):
                shutil.rmtree(here / name)
                folders.remove(name)
        for name in files:
            if matcher.why((here / name).relative_to(folder).as_posix()):
                (here / name).unlink()


class _Copy:
    """One copy operation (builder.go applyCopyOperation), from the workspace into the artifact's folder."""

    def __init__(self, operation: dict, source: Path, staged: Staged, budget: Budget, where: str):
        self.source, self.dest, self.where = source, staged.path, where
        self.staged, self.budget = staged, budget
        self.probes, self.origins = staged.probes, staged.origins
        origin, target = str(operation.get("from", "")), str(operation.get("to", ""))
        alias, _, self.pattern = origin.removeprefix("@").partition("/")
        if not origin.startswith("@") or not _:
            raise Unstaged(f"copy source {origin!r} is not @alias/pattern; the generator fails")
        self.alias = alias
        if not target.startswith("@artifact/"):
            raise Unstaged(f"copy destination {target!r} is not @artifact/path; the generator fails")
        self.target = target.removeprefix("@artifact/")
        self.into_folder = target.endswith("/")
        self.strategy = str(operation.get("strategy") or "Overwrite")
        self.excludes = [_Exclude(str(p), where) for p in sequence(operation, "exclude")]
        if self.strategy == "Extract":
            raise Unstaged("copy strategy Extract (tarballs) is not rendered here")

    def run(self, output: Output, local: set[str]) -> None:
        if self.alias not in local:
            source = output.sources().get(self.alias)
            what = f"source {source.describe()}" if source else f"source alias {self.alias!r}"
            raise Unstaged(f"it copies from {what}, which is not this repository's GitRepository")
        if not any(c in self.pattern for c in _GLOB_CHARS):
            self._single(os.path.normpath(self.pattern))
            return
        base = _selection_root(self.pattern)
        self.probes.add(("tree", base))
        matches = [m for m in self._glob(self.pattern) if m not in (".", "..")]
        if not matches:
            raise Unstaged(f"no file matches {self.pattern!r}; the generator fails")
        kept = [m for m in matches if not self._excluded(m, base)]
        if not kept:
            raise Unstaged(f"every file matching {self.pattern!r} is excluded; the generator fails")
        prefix = self.pattern[: -len("/**")] + "/" if self.pattern.endswith("/**") else None
        for match in kept:
            relative = match[len(prefix) :] if prefix and match.startswith(prefix) else match
            self._copy(match, os.path.join(self.target, relative), base)

    def _single(self, path: str) -> None:
        source = self._inside(self.source, path)
        self.probes.update({("exists", path), ("isdir", path)})
        if not source.exists():
            raise Unstaged(f"copy source {path!r} does not exist; the generator fails")
        if source.is_dir():
            self._copy(path, os.path.join(self.target, os.path.basename(path)), path)
            return
        if self._excluded(path, "."):
            return
        target = self.target
        if self.into_folder or self._inside(self.dest, target).is_dir():
            target = os.path.join(target, os.path.basename(path))
        self._copy(path, target, ".")

    def _copy(self, path: str, target: str, base: str) -> None:
        source, dest = self._inside(self.source, path), self._inside(self.dest, target)
        if not source.is_dir():
            self._file(path, dest)
            return
        self.probes.add(("tree", path))
        dest.mkdir(parents=True, exist_ok=True)
        self.origins[dest.relative_to(self.dest).as_posix()] = path
        for current, folders, files in _walk(source):
            here = Path(current)
            for name in list(folders):
                relative = (here / name).relative_to(self.source).as_posix()
                if self._excluded(relative, base):
                    folders.remove(name)
                else:
                    made = dest / (here / name).relative_to(source)
                    made.mkdir(parents=True, exist_ok=True)
                    self.origins[made.relative_to(self.dest).as_posix()] = relative
            for name in files:
                relative = (here / name).relative_to(self.source).as_posix()
                if not self._excluded(relative, base):
                    self._file(relative, dest / (here / name).relative_to(source))

    def _file(self, path: str, dest: Path) -> None:
        if self.strategy == "Merge" and dest.exists():
            raise Unstaged(f"copy strategy Merge (YAML merged into {dest.name}) is not rendered here")
        self.probes.add(("file", path))
        self._count((self.source / path).stat().st_size)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.source / path, dest)
        self.origins[dest.relative_to(self.dest).as_posix()] = path

    def _count(self, size: int) -> None:
        """One more file of `size` bytes, within the bounds of the artifact and of the render."""
        staged, budget = self.staged, self.budget
        staged.files, staged.bytes = staged.files + 1, staged.bytes + size
        budget.files, budget.bytes = budget.files + 1, budget.bytes + size
        over = ""
        if staged.files > MAX_ARTIFACT_FILES:
            over = f"its files are more than the {MAX_ARTIFACT_FILES} staged here per artifact"
        elif staged.bytes > MAX_ARTIFACT_BYTES:
            over = f"its files hold more than the {MAX_ARTIFACT_BYTES} bytes staged here per artifact"
        elif budget.files > MAX_STAGED_FILES:
            over = f"the artifacts of this render hold more than the {MAX_STAGED_FILES} files staged here per run"
        elif budget.bytes > MAX_STAGED_BYTES:
            over = f"the artifacts of this render hold more than the {MAX_STAGED_BYTES} bytes staged here per run"
        if over:
            raise Unstaged(f"{over}; it is not rendered here")

    def _inside(self, root: Path, relative: str) -> Path:
        path = Path(os.path.normpath(root / relative))
        if not path.is_relative_to(root):
            raise Unstaged(f"{relative!r} leads out of the artifact; the generator fails")
        return path

    def _glob(self, pattern: str) -> list[str]:
        """Go's fs.Glob(pattern) over the workspace (io/fs glob.go), a segment at a time where Go recurses: the
        folders before the first segment with a glob character as they are, then each later segment matched
        against the names in the folders found so far (a folder that cannot be listed gives none)."""
        if not any(c in pattern for c in _GO_META):
            return [pattern] if os.path.lexists(self.source / pattern) else []
        parts = pattern.split("/")
        first = next(i for i, part in enumerate(parts) if any(c in part for c in _GO_META))
        try:
            matchers = [go_matcher(part, self.where) for part in parts[first:]]
        except ValueError:
            raise Unstaged(f"copy pattern {pattern!r} is malformed; the generator fails") from None
        found = ["/".join(parts[:first]) or "."]
        for matches in matchers:
            below = []
            for parent in found:
                here = self._inside(self.source, parent)
                if here.is_dir():
                    below += [os.path.normpath(f"{parent}/{n}") for n in sorted(os.listdir(here)) if matches(n)]
            found = below
            if not found:
                break
        return found

    def _excluded(self, path: str, base: str) -> bool:
        """builder.go shouldExcludePath: the path in the source, or below the pattern's literal prefix."""
        if any(exclude.matches(path) for exclude in self.excludes):
            return True
        if base in (".", "") or path == base or not path.startswith(base.rstrip("/") + "/"):
            return False
        below = path[len(base.rstrip("/")) + 1 :]
        return any(exclude.matches(below) for exclude in self.excludes)


def _selection_root(pattern: str) -> str:
    """The literal folders of a pattern before its first glob segment (builder.go sourceSelectionRoot)."""
    parts = []
    for part in os.path.normpath(pattern).split("/"):
        if any(c in part for c in _GLOB_CHARS):
            break
        parts.append(part)
    return "/".join(parts) or "."


class _Exclude:
    """One exclude pattern (builder.go shouldExclude, doublestar v4): `**` as a whole segment matches any number of
    segments, every other segment is path.Match's; a pattern without `/` also matches a file name alone."""

    def __init__(self, pattern: str, where: str):
        if "{" in pattern:
            raise Unstaged("exclude patterns with {...} alternatives are not rendered here")
        try:
            self.parts = [None if part == "**" else go_matcher(part, where) for part in pattern.split("/")]
        except ValueError:
            raise Unstaged(f"exclude pattern {pattern!r} is malformed; the generator fails") from None
        self.by_name = "/" not in pattern

    def matches(self, path: str) -> bool:
        return self._match(path.split("/")) or (self.by_name and self._match(path.rsplit("/", 1)[-1:]))

    def _match(self, names: list[str]) -> bool:
        """Segment by segment, each pair of positions once."""
        reach = {0}  # positions in `names` the parts so far can end at
        for matcher in self.parts:
            if matcher is None:
                reach = set(range(min(reach), len(names) + 1))
            else:
                reach = {i + 1 for i in reach if i < len(names) and matcher(names[i])}
            if not reach:
                return False
        return len(names) in reach
