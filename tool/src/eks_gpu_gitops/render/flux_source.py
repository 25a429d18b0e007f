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
- the patterns are gitignore patterns, matched last to first, the first that matches deciding
  (go-git's gitignore matcher); a pattern that matches a folder matches everything below it.

Not modelled: the GitRepository's own spec.ignore, which adds patterns per cluster.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from stat import S_ISREG

import pathspec.patterns.gitignore.spec as gitignore

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


def _read(file: Path) -> str:
    return (regular_file_bytes(file) or b"").decode(errors="replace")


def _patterns(lines, domain: tuple[str, ...]) -> list[tuple[tuple[str, ...], str, object]]:
    found = []
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        try:
            pattern = gitignore.GitIgnoreSpecPattern(line)
        except ValueError:  # GitIgnorePatternError (`!`, a lone `\`): go-git reads such a line as matching nothing
            continue
        if pattern.include is not None:
            found.append((domain, line, pattern))
    return found


class ArtifactFilter:
    """The files of a repository that source-controller leaves out of its artifact."""

    def __init__(self, root: Path):
        own = []
        for current, folders, files in os.walk(root):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED)
            if IGNORE_FILE in files:
                here = Path(current)
                domain = () if here == root else here.relative_to(root).parts
                own += _patterns(_read(here / IGNORE_FILE).splitlines(), domain)
        self.own = bool(own)
        self.patterns = _patterns(VCS_PATTERNS, ()) + (own or _patterns(DEFAULT_PATTERNS, ()))

    def why(self, relative: str, folder: bool = False) -> str:
        """Why `relative` (a path inside the repository, / separated; a folder's with `folder`) is left out;
        "" when it is not."""
        parts = tuple(relative.split("/"))
        for domain, line, pattern in reversed(self.patterns):
            if parts[: len(domain)] != domain or len(parts) == len(domain):
                continue
            if pattern.match_file("/".join(parts[len(domain) :]) + ("/" if folder else "")) is not None:
                if not pattern.include:
                    return ""
                where = "/".join((*domain, IGNORE_FILE)) if self.own and line not in VCS_PATTERNS else ""
                return f"{where} excludes it ({line})" if where else f"source-controller leaves out {line}"
        return ""

    def identity(self) -> str:
        """A hash of the rules, for the keys of what depends on them (the render cache)."""
        text = "\n".join(f"{'/'.join(domain)}\0{line}" for domain, line, _ in self.patterns)
        return hashlib.sha256(text.encode()).hexdigest()
