"""What Flux's source-controller puts in the artifact a GitRepository's Kustomizations build from.

source-controller v1.9.5 (the one Flux v2.9.5 installs; internal/controller/gitrepository_controller.go,
reconcileArtifact) archives the checkout with fluxcd/pkg artifact's Storage.Archive and SourceIgnoreFilter
(artifact/storage/archive.go, unchanged from v0.18.2 to v0.20.0), reading the rules with fluxcd/pkg
sourceignore v0.18.0 (sourceignore.go):

- only regular files go in: a symbolic link is left out, whether it points inside the repository or not;
- every `.sourceignore` below the root is read (LoadIgnorePatterns), each one's patterns scoped to its folder;
  with any pattern at all, the filter is the VCS patterns (`.git/`, `.gitignore`, `.gitmodules`,
  `.gitattributes`) followed by those patterns; with none, the VCS patterns and the default ones
  (images, archives, CI configurations, `.sops.yaml`, ...);
- the lines are read with Go's bufio.Scanner (ReadPatterns): split at `\\n`, one `\\r` before it dropped, a line
  that starts with `#` or is only white space skipped, and a line of 64 KiB or more ends the reading of the file;
- the patterns are go-git's gitignore patterns (sourceignore/gitignore/pattern.go, copied from go-git v5.16.4
  plumbing/format/gitignore), matched last to first, the first that matches deciding (matcher.go): a pattern
  without `/` matches any component of the path (`simpleNameMatch`), one with `/` matches components in turn
  from the pattern's folder, `**` skipping to the first component the next part matches, never further
  (`globMatch`); each part is matched with Go's path/filepath.Match (Go 1.26, the Go source-controller v1.9.5
  is built with), ported below on bytes: `*` is a run of bytes, `?` and `[...]` one UTF-8 rune (an invalid byte
  is one rune, U+FFFD), `\\` escapes, and a malformed part (`[`, `[]`, `[a-`, a final `\\`) matches nothing.

Bounded work: a pull request writes these patterns, and the regular expressions a gitignore library makes of them
backtrack (`**/**/**/a*a*a*a*b` takes minutes on a long path). Here a part is split at its stars into chunks of
single-rune elements, and each chunk is placed at its leftmost match and never moved again, as Go does: a chunk
costs at most (name length x chunk length) steps, in C (a regular expression without repetition, or a
bytes.find). The number of patterns, their length and the steps all patterns may take over one run are bounded,
each with a one-line refusal naming the file.

Not modelled: the GitRepository's own spec.ignore, which adds patterns per cluster; a `.sourceignore` that is a
symbolic link (source-controller reads what it points to on the cluster's side: it is not read here).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from stat import S_ISLNK, S_ISREG

from ..core.errors import InputError
from ..core.files import size_text

IGNORE_FILE = ".sourceignore"
# sourceignore v0.18.0: ExcludeVCS, then ExcludeExt, ExcludeCI and ExcludeExtra (DefaultPatterns).
VCS_PATTERNS = (".git/", ".gitignore", ".gitmodules", ".gitattributes")
DEFAULT_PATTERNS = (
    *("*.jpg", "*.jpeg", "*.gif", "*.png", "*.wmv", "*.flv", "*.tar.gz", "*.zip"),
    *(".github/", ".circleci/", ".travis.yml", ".gitlab-ci.yml", "appveyor.yml", ".drone.yml", "cloudbuild.yaml"),
    *("codeship-services.yml", "codeship-steps.yml"),
    *("**/.goreleaser.yml", "**/.sops.yaml", "**/.flux.yaml"),
)
_SKIPPED = (".git",)

# Limits on what the repository's .sourceignore files may ask for, with a one-line refusal past each. A real
# .sourceignore holds a few dozen patterns of a few dozen bytes.
# - A .sourceignore of at most 1 MiB is read (a larger one is refused, not silently read as empty).
MAX_IGNORE_FILE_BYTES = 1 << 20
# - Go's bufio.Scanner stops at a line of MaxScanTokenSize (64 KiB) or more: source-controller drops the rest of
#   the file there without a word; such a line is refused here rather than copied.
SCANNER_LINE_BYTES = 64 << 10
# - Patterns in all of the repository's .sourceignore files together, and bytes in one (PATH_MAX: no longer path
#   exists for a pattern to name).
MAX_PATTERNS = 1_000
MAX_PATTERN_BYTES = 4_096
# - Steps of the matcher over one run (one step: one element of a chunk compared at one place of a name; counted
#   as the most a search may take, only for chunks with `?` or `[...]`). The template's repository takes none; a
#   repository of 50,000 files and ten such patterns some 5 x 10^7 (each name is matched once per pattern);
#   5 x 10^8 steps are a few seconds of the slowest patterns there are (1 to 5 ns a step, measured).
MAX_MATCH_STEPS = 500_000_000


class _Malformed(Exception):
    """filepath.ErrBadPattern: go-git reads a pattern with a malformed part as matching nothing."""


# --- Go's path/filepath.Match, on bytes -------------------------------------------------------------------

_VALID_MULTI = (
    rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
    rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
# One rune as utf8.DecodeRuneInString reads it: a valid UTF-8 sequence, else one byte (RuneError).
_ANY_RUNE = rb"(?>[\x00-\x7f]|" + _VALID_MULTI + rb"|[\x80-\xff])"
_INVALID_BYTE = rb"(?!" + _VALID_MULTI + rb")[\x80-\xff]"
_RUNE_ERROR = 0xFFFD
_MAX_RUNE = 0x10FFFF


def _decode_rune(data: bytes, index: int) -> tuple[int, int]:
    """utf8.DecodeRune: (rune, size), (U+FFFD, 1) for an invalid or truncated sequence."""
    lead = data[index]
    if lead < 0x80:
        return lead, 1
    size = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    try:
        text = data[index : index + size].decode() if size else ""
    except UnicodeDecodeError:
        text = ""
    return (ord(text), size) if len(text) == 1 else (_RUNE_ERROR, 1)


def _get_esc(chunk: bytes, index: int) -> tuple[int, int]:
    """getEsc: a possibly escaped rune of a character class, and the index after it."""
    if index >= len(chunk) or chunk[index] in b"-]":
        raise _Malformed
    if chunk[index] == ord("\\"):
        index += 1
        if index >= len(chunk):
            raise _Malformed
    rune, size = _decode_rune(chunk, index)
    if rune == _RUNE_ERROR and size == 1:
        raise _Malformed
    index += size
    if index >= len(chunk):
        raise _Malformed
    return rune, index


def _utf8_split(low: int, high: int) -> list[tuple[int, int]] | None:
    """low..high cut where its runes' encodings differ in length or in more than their last bytes; None when
    one sequence of byte ranges encodes it."""
    if low <= 0xDFFF and high >= 0xD800:  # surrogates: no encoding
        return [(low, 0xD7FF), (0xE000, high)]
    for edge in (0x7F, 0x7FF, 0xFFFF):
        if low <= edge < high:
            return [(low, edge), (edge + 1, high)]
    for shift in (6, 12, 18):
        mask = (1 << shift) - 1
        if low & ~mask != high & ~mask:
            if low & mask:
                return [(low, low | mask), ((low | mask) + 1, high)]
            if high & mask != mask:
                return [(low, (high & ~mask) - 1), (high & ~mask, high)]
    return None


def _utf8_sequences(low: int, high: int) -> list[list[tuple[int, int]]]:
    """The UTF-8 encodings of the runes low..high, as sequences of byte ranges."""
    found, todo = [], [(low, high)]
    while todo:
        low, high = todo.pop()
        if low > high:
            continue
        split = _utf8_split(low, high)
        if split is None:
            found.append(list(zip(chr(low).encode(), chr(high).encode(), strict=True)))
        else:
            todo += split
    return found


def _class_regex(ranges: list[tuple[int, int]], negated: bool) -> bytes:
    """A character class of filepath.Match, as a regular expression over the bytes of one rune."""
    merged: list[list[int]] = []
    for low, high in sorted((low, min(high, _MAX_RUNE)) for low, high in ranges if low <= high and low <= _MAX_RUNE):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    if negated:
        edges, start = [], 0
        for low, high in merged:
            if low > start:
                edges.append([start, low - 1])
            start = high + 1
        if start <= _MAX_RUNE:
            edges.append([start, _MAX_RUNE])
        merged = edges
    alternatives = [
        b"".join(b"[\\x%02x-\\x%02x]" % pair for pair in sequence)
        for low, high in merged
        for sequence in _utf8_sequences(low, high)
    ]
    if any(low <= _RUNE_ERROR <= high for low, high in merged):
        alternatives.append(_INVALID_BYTE)  # an invalid byte is read as U+FFFD
    return b"(?>" + b"|".join(alternatives) + b")" if alternatives else b"(?!)"


class _Chunk:
    """A run of single-rune elements (literals, `?`, classes): matchChunk, compiled."""

    def __init__(self, chunk: bytes):
        parts, literal, index = [], bytearray(), 0
        self.elements = 0
        plain = True
        while index < len(chunk):
            byte = chunk[index]
            self.elements += 1
            if byte == ord("["):
                index += 1
                negated = index < len(chunk) and chunk[index] == ord("^")
                index += negated
                ranges: list[tuple[int, int]] = []
                while True:
                    if index < len(chunk) and chunk[index] == ord("]") and ranges:
                        index += 1
                        break
                    low, index = _get_esc(chunk, index)
                    high = low
                    if chunk[index] == ord("-"):
                        high, index = _get_esc(chunk, index + 1)
                    ranges.append((low, high))
                parts.append(_class_regex(ranges, negated))
                plain = False
                continue
            if byte == ord("?"):
                parts.append(_ANY_RUNE)
                plain = False
                index += 1
                continue
            if byte == ord("\\"):
                index += 1
                if index >= len(chunk):
                    raise _Malformed
                byte = chunk[index]
            parts.append(b"\\x%02x" % byte)
            literal.append(byte)
            index += 1
        self.literal = bytes(literal) if plain else None
        if not plain:
            source = b"".join(parts)
            self.at = re.compile(source, re.DOTALL)
            self.at_end = re.compile(source + rb"\Z", re.DOTALL)


class _Glob:
    """filepath.Match(pattern, name) for one pattern; Go 1.26 match.go, each chunk placed at its leftmost match."""

    def __init__(self, pattern: bytes):
        self.chunks: list[tuple[bool, _Chunk | None]] = []
        self.literal = None if any(c in pattern for c in b"*?[\\") else pattern
        rest = pattern
        while rest:
            star, chunk, rest = self._scan_chunk(rest)
            self.chunks.append((star, _Chunk(chunk) if chunk else None))
        # Only literal chunks (`*.yaml`): str methods, no regular expression, nothing worth remembering.
        self.cheap = all(chunk is None or chunk.literal is not None for _, chunk in self.chunks)

    @staticmethod
    def _scan_chunk(pattern: bytes) -> tuple[bool, bytes, bytes]:
        stripped = pattern.lstrip(b"*")
        star, pattern = len(stripped) != len(pattern), stripped
        in_range, index = False, 0
        while index < len(pattern):
            byte = pattern[index]
            if byte == ord("\\"):
                if index + 1 < len(pattern):
                    index += 1
            elif byte == ord("["):
                in_range = True
            elif byte == ord("]"):
                in_range = False
            elif byte == ord("*") and not in_range:
                return star, pattern[:index], pattern[index:]
            index += 1
        return star, pattern, b""

    def match(self, name: bytes, meter: _Meter) -> bool:
        if self.literal is not None:
            return name == self.literal
        position, chunks = 0, self.chunks
        for number, (star, chunk) in enumerate(chunks):
            last = number == len(chunks) - 1
            if chunk is None:  # a final star: the rest of the name (which holds no separator)
                return True
            if chunk.literal is not None:
                if not star:
                    if not name.startswith(chunk.literal, position):
                        return False
                    position += len(chunk.literal)
                    if last and position != len(name):
                        return False
                elif last:
                    start = len(name) - len(chunk.literal)
                    return start >= position and name.endswith(chunk.literal)
                else:
                    found = name.find(chunk.literal, position)
                    if found < 0:
                        return False
                    position = found + len(chunk.literal)
                continue
            if not star:
                meter.charge(chunk.elements)
                found = (chunk.at_end if last else chunk.at).match(name, position)
            else:
                places = len(name) - position + 1
                meter.charge(places * min(chunk.elements, places))
                found = (chunk.at_end if last else chunk.at).search(name, position)
            if found is None:
                return False
            position = found.end()
        return position == len(name)


class _Meter:
    """The steps the matcher took over one ArtifactFilter, refused past MAX_MATCH_STEPS."""

    def __init__(self):
        self.steps = 0
        self.where = ""

    def charge(self, steps: int) -> None:
        self.steps += steps
        if self.steps > MAX_MATCH_STEPS:
            raise InputError(
                f"{self.where}: matching its patterns against the repository's paths takes more than "
                f"{MAX_MATCH_STEPS:,} steps; refused"
            )


def go_matcher(pattern: str, where: str):
    """Go's path.Match(pattern, name) as a function of `name` (Go 1.26: `*` and `?` never match `/`), its steps
    bounded as an ArtifactFilter's are (a one-line refusal naming `where`); ValueError for a malformed pattern
    (path.ErrBadPattern)."""
    try:
        glob = _Glob(os.fsencode(pattern))
    except _Malformed:
        raise ValueError(f"malformed pattern {pattern!r}") from None
    meter = _Meter()
    meter.where = where
    return lambda name: glob.match(os.fsencode(name), meter)


# --- go-git's gitignore patterns ----------------------------------------------------------------------------

_TRAVERSE = "**"
_ROOT = ""


class _Pattern:
    """gitignore.ParsePattern and Pattern.Match (fluxcd/pkg sourceignore/gitignore/pattern.go)."""

    def __init__(self, line: bytes, domain: tuple[bytes, ...]):
        self.domain = domain
        self.inclusion = line.startswith(b"!")
        pattern = line[1:] if self.inclusion else line
        if not pattern.endswith(b"\\ "):
            pattern = pattern.rstrip(b" ")
        self.dir_only = pattern.endswith(b"/")
        if self.dir_only:
            pattern = pattern[:-1]
        self.is_glob = b"/" in pattern
        self.never = False
        self.parts: list = []
        for part in pattern.split(b"/"):
            if part == b"":
                self.parts.append(_ROOT)
            elif part == b"**" and self.is_glob:
                self.parts.append(_TRAVERSE)
            elif b"**" in part and self.is_glob:
                self.never = True  # globMatch returns false on reaching it, and every part is reached
            else:
                try:
                    self.parts.append(_Glob(part))
                except _Malformed:  # filepath.Match's error: no match, wherever it is reached
                    self.never = True
        self.shown = IGNORE_FILE  # the file it comes from, for the refusal of MAX_MATCH_STEPS
        # Folders' names come again with every file below them: each name is matched once per part.
        self.memo: dict[tuple[int, bytes], bool] = {}

    def _name(self, part: _Glob, name: bytes, meter: _Meter) -> bool:
        if part.literal is not None:
            return name == part.literal
        if part.cheap:
            return part.match(name, meter)
        key = (id(part), name)
        found = self.memo.get(key)
        if found is None:
            if len(self.memo) > 10_000:
                self.memo.clear()
            meter.where = self.shown
            found = self.memo[key] = part.match(name, meter)
        return found

    def match(self, path: tuple[bytes, ...], is_dir: bool, meter: _Meter) -> bool | None:
        """True (exclude), False (include, a `!` pattern), None (no match)."""
        if self.never or len(path) <= len(self.domain):
            return None
        if self.domain:
            if path[: len(self.domain)] != self.domain:
                return None
            path = path[len(self.domain) :]
        found = self._glob_match(path, is_dir, meter) if self.is_glob else self._simple_match(path, is_dir, meter)
        return None if not found else not self.inclusion

    def _simple_match(self, path: tuple[bytes, ...], is_dir: bool, meter: _Meter) -> bool:
        part = self.parts[0]
        if part == _ROOT:  # an empty pattern matches an empty name only: there is none
            return False
        if part.literal is not None:
            if part.literal not in path:
                return False
            index = path.index(part.literal)
            return not (self.dir_only and not is_dir and index == len(path) - 1)
        for index, name in enumerate(path):
            if self._name(part, name, meter):
                return not (self.dir_only and not is_dir and index == len(path) - 1)
        return False

    def _glob_match(self, path: tuple[bytes, ...], is_dir: bool, meter: _Meter) -> bool:
        matched, traverse, index = False, False, 0
        for number, part in enumerate(self.parts):
            if part == _ROOT:
                traverse = False
                continue
            if part == _TRAVERSE:
                if number == len(self.parts) - 1:
                    break
                traverse = True
                continue
            if index >= len(path):
                return False
            if traverse:
                traverse = False
                while index < len(path):
                    name = path[index]
                    index += 1
                    if self._name(part, name, meter):
                        matched = True
                        break
                    if index >= len(path):
                        matched = False
            else:
                if not self._name(part, path[index], meter):
                    return False
                matched = True
                index += 1
        if matched and self.dir_only and not is_dir and index >= len(path):
            matched = False
        return matched


# --- reading the rules ----------------------------------------------------------------------------------

# unicode.IsSpace, what strings.TrimSpace trims.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def regular_file_bytes(file: Path, limit: int = 1 << 20) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes; None for a link (not in the artifact, so a
    .sourceignore that is one never reaches source-controller), a device or a pipe (never read: /dev/zero
    would not end), a larger file, or one that cannot be read."""
    try:
        stat = file.lstat()
        if not S_ISREG(stat.st_mode) or stat.st_size > limit:
            return None
        return file.read_bytes()
    except OSError:
        return None


def _lines(data: bytes) -> list[bytes]:
    """bufio.ScanLines: the lines, a final one without newline included, a `\\r` before the newline dropped."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _patterns(lines, domain: tuple[str, ...], where: str = "", counted: int = 0) -> list[tuple]:
    """(domain, the line as shown, _Pattern, the file it comes from: "" for source-controller's own) of each pattern
    line, refusing a line or a count past the limits."""
    found = []
    encoded = tuple(os.fsencode(part) for part in domain)
    for number, raw in enumerate(lines, 1):
        line = raw if isinstance(raw, bytes) else raw.encode()
        if where and len(line) >= SCANNER_LINE_BYTES:
            raise InputError(
                f"{where}:{number}: a line of {size_text(SCANNER_LINE_BYTES)} or more, where source-controller "
                "stops reading the file; refused"
            )
        line = line.removesuffix(b"\r")
        if line.startswith(b"#") or not line.decode(errors="surrogateescape").strip(_GO_SPACE):
            continue
        if where and len(line) > MAX_PATTERN_BYTES:
            raise InputError(f"{where}:{number}: a pattern longer than {MAX_PATTERN_BYTES:,} bytes; refused")
        if where and counted + len(found) >= MAX_PATTERNS:
            raise InputError(
                f"{where}:{number}: more than {MAX_PATTERNS:,} patterns in the repository's {IGNORE_FILE} files; "
                "refused"
            )
        pattern = _Pattern(line, encoded)
        pattern.shown = where or IGNORE_FILE
        found.append((domain, line.decode(errors="replace"), pattern, where))
    return found


def _read(file: Path, shown: str) -> list[bytes]:
    """The lines of a .sourceignore: none when it is not a regular file (a link is not in the artifact), a
    refusal when it is larger than MAX_IGNORE_FILE_BYTES."""
    try:
        info = file.lstat()
    except OSError:
        return []
    if S_ISLNK(info.st_mode) or not S_ISREG(info.st_mode):
        return []
    if info.st_size > MAX_IGNORE_FILE_BYTES:
        raise InputError(
            f"{shown}: larger than {size_text(MAX_IGNORE_FILE_BYTES)} ({size_text(info.st_size)}); refused"
        )
    data = regular_file_bytes(file, MAX_IGNORE_FILE_BYTES)
    return _lines(data) if data else []


class ArtifactFilter:
    """The files of a repository that source-controller leaves out of its artifact."""

    def __init__(self, root: Path):
        own: list[tuple] = []
        for current, folders, files in os.walk(root):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED)
            if IGNORE_FILE in files:
                here = Path(current)
                domain = () if here == root else here.relative_to(root).parts
                shown = "/".join((*domain, IGNORE_FILE))
                own += _patterns(_read(here / IGNORE_FILE, shown), domain, shown, len(own))
        self.own = bool(own)
        self.patterns = _patterns(VCS_PATTERNS, ()) + (own or _patterns(DEFAULT_PATTERNS, ()))
        self.meter = _Meter()

    @classmethod
    def defaults(cls) -> ArtifactFilter:
        """What fluxcd/pkg artifact's SourceIgnoreFilter(nil, nil) leaves out (source-watcher archives an
        ExternalArtifact with it): the VCS and default patterns, whatever .sourceignore files the folder holds."""
        made = cls.__new__(cls)
        made.own = False
        made.patterns = _patterns(VCS_PATTERNS, ()) + _patterns(DEFAULT_PATTERNS, ())
        made.meter = _Meter()
        return made

    def why(self, relative: str, folder: bool = False) -> str:
        """Why `relative` (a path inside the repository, / separated; a folder's with `folder`) is left out;
        "" when it is not."""
        path = tuple(os.fsencode(part) for part in relative.split("/"))
        for _, line, pattern, where in reversed(self.patterns):
            excluded = pattern.match(path, folder, self.meter)
            if excluded is None:
                continue
            if not excluded:
                return ""
            return f"{where} excludes it ({line})" if where else f"source-controller leaves out {line}"
        return ""

    def identity(self) -> str:
        """A hash of the rules, for the keys of what depends on them (the render cache)."""
        text = "\n".join(f"{'/'.join(domain)}\0{line}" for domain, line, _, _ in self.patterns)
        return hashlib.sha256(text.encode()).hexdigest()
