"""What a diff finds: object changes, impact figures and notices, per environment.

Formats read only these records. They hold masked diff text and names, never an object's
content, so no output can show a value that masking removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Manifest

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
MOVED = "moved"  # to another namespace (pairing.py): the old object goes, a new one is created
STATUSES = (ADDED, CHANGED, MOVED, REMOVED)  # the order counts are shown in
STATUS_SIGN = {ADDED: "+", REMOVED: "-", CHANGED: "~", MOVED: ">"}

# Notice severities, most serious first.
DANGER = "danger"  # data is deleted, or the change fails to apply
WARNING = "warning"  # the change does not take effect the way a reader would expect
INFO = "info"
SEVERITIES = (DANGER, WARNING, INFO)


@dataclass(frozen=True)
class Key:
    """How an object is paired between the two sides."""

    env: str
    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, manifest: Manifest) -> Key:
        return cls(manifest.env, manifest.group, manifest.kind, manifest.namespace, manifest.name)

    @property
    def resource(self) -> str:
        """Kind namespace/name, the way reviewers read it."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass
class ObjectChange:
    key: Key
    status: str  # ADDED, REMOVED, CHANGED or MOVED
    before: Manifest | None  # for impact rules only; formats never read these
    after: Manifest | None
    diff: str  # unified diff of the masked objects
    additions: int = 0
    deletions: int = 0
    from_namespace: str = ""  # MOVED: the base side's namespace (key holds the head side's)

    @property
    def old_key(self) -> Key:
        """The base side's key: where the object was, for a moved one."""
        if self.status != MOVED:
            return self.key
        return Key(self.key.env, self.key.group, self.key.kind, self.from_namespace, self.key.name)

    @property
    def resource(self) -> str:
        """How formats name the object: Key.resource, or "Kind name: namespace a -> b" for a move."""
        if self.status != MOVED:
            return self.key.resource
        return f"{self.key.kind} {self.key.name}: namespace {self.from_namespace} -> {self.key.namespace}"

    @property
    def source(self) -> str:
        """The Flux Kustomization (or "eksctl") that owns the object, head side first."""
        manifest = self.after or self.before
        return manifest.source if manifest else ""

    @property
    def moved_from(self) -> str:
        """The base side's owner when the object moved to another Flux Kustomization."""
        if self.before and self.after and self.before.source != self.after.source:
            return self.before.source
        return ""


@dataclass
class Notice:
    severity: str
    resource: str  # Key.resource of the object it is about
    title: str  # a few words: "cannot change in place", "data loss"
    message: str  # what will happen, one or two sentences
    id: str = ""  # its kind in the catalogue (diff/notices/catalogue.py)


@dataclass
class Figure:
    """A number before and after, with how it was made up on each side."""

    before: int | None
    after: int | None
    before_detail: str = ""
    after_detail: str = ""

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class EnvironmentDiff:
    name: str
    status: str  # ADDED, REMOVED, CHANGED, or "" when nothing changed
    changes: list[ObjectChange] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    mpijob_gpus: Figure = field(default_factory=lambda: Figure(0, 0))
    gpu_quota: Figure = field(default_factory=lambda: Figure(0, 0))
    gpu_capacity: Figure = field(default_factory=lambda: Figure(0, 0))

    def count(self, status: str) -> int:
        return sum(1 for change in self.changes if change.status == status)


@dataclass
class BrokenEnvironment:
    """An environment left out of the diff because one side does not render it."""

    name: str
    error: str  # one line, masked ("working tree does not render: ... (environment dev; ...)")


@dataclass
class Side:
    label: str  # "main (1a2b3c4)" or "working tree"
    ref: str  # what the user asked for ("" for the working tree)
    commit: str  # full commit id ("" for the working tree)


@dataclass
class Report:
    base: Side
    head: Side
    environments: list[EnvironmentDiff]
    broken: list[BrokenEnvironment] = field(default_factory=list)  # left out: every format says so first

    @property
    def changed(self) -> list[EnvironmentDiff]:
        return [env for env in self.environments if env.changes]

    @property
    def has_changes(self) -> bool:
        return bool(self.changed)

    @property
    def notices(self) -> list[tuple[str, Notice]]:
        """Every notice with its environment, most serious first."""
        found = [(env.name, notice) for env in self.environments for notice in env.notices]
        return sorted(found, key=lambda item: SEVERITIES.index(item[1].severity))
