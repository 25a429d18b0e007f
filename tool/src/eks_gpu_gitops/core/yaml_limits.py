"""Loading YAML from the repository with bounded work: an alias bomb, a document nested thousands of levels deep, or
one that expands to gigabytes of text, is refused in one line before it is built.

YAML aliases (`*name`) repeat an anchored node (`&name`). PyYAML shares the repeated node, so loading
a "billion laughs" document is quick, but everything that walks the result afterwards (schema checks,
rules, masking, the diff, JSON dumps) walks every repetition: nine nested levels of ten aliases are 10^9 nodes,
and one string of 100 KB aliased 100,000 times is 10 GB of text in a few nodes.
Each document is composed first (a graph of nodes, aliases shared), its expanded size is counted on
that graph (each node once, memoised): a document over MAX_EXPANDED nodes or MAX_EXPANDED_BYTES characters of
scalars, nested deeper than MAX_DEPTH once its aliases are written out, or whose aliases refer to themselves, is
refused with one line before anything is constructed.

Depth is checked on the text before it is composed at all: libyaml's composer recurses in C, once per level, and a
document of 200 KB (100,000 `[`) overflows the stack and kills the process; every walker after it (PyYAML's
representer, copy.deepcopy, json, the tool's own) recurses in Python. The check reads libyaml's parse events (a
state machine, no recursion), about half of what composing the same text costs.
"""

from __future__ import annotations

import yaml

# libyaml's loader, where PyYAML was built with it, parses about ten times faster.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Nodes a document may expand to. The largest pinned CRD schema (kubeflow's MPIJob, with all of the pod
# template) is about 10,000 nodes expanded; a rendered environment's largest document is far smaller.
MAX_EXPANDED = 1_000_000
# Characters of scalars (keys and values) a document may expand to through its aliases: the MPIJob CRD, the largest
# pinned schema, holds 280,000; an object the API server stores is at most 1.5 MiB (etcd's request limit), so no
# real document comes within 40 times of this. The helper applies the same limit to what kustomize reads
# (helper/limits.go).
MAX_EXPANDED_BYTES = 64 << 20
# Levels of nested collections (mappings and sequences). The deepest pinned CRD schema (MPIJob, with the pod
# template) is 35 levels, a Kubernetes object far less; the walkers that read a document after it is loaded recurse
# a few Python frames a level, well inside Python's limit of 1,000 frames at 100 levels.
MAX_DEPTH = 100
# A YAML file the tool reads whole (a manifest named on the command line, a settings file): the largest pinned CRD
# is 670 KB and a whole rendered environment a few MB, while loading costs about ten times the text in memory.
MAX_FILE_BYTES = 64 << 20
# A text with fewer characters that open a collection than this cannot nest deeper than MAX_DEPTH: its depth is
# not measured.
_OPENERS = "[{-?:"


class LimitError(yaml.YAMLError):
    """A document past one of the limits (aliases, expanded size, depth), or whose aliases refer to themselves.
    Its message is one line, said after the file's name."""


# The name the callers know it by.
AliasLimitError = LimitError

_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep; refused"
_TOO_MANY_NODES = f"its aliases expand to more than {MAX_EXPANDED:,} nodes (an alias bomb?); refused"
_TOO_LARGE = f"its aliases expand to more than {MAX_EXPANDED_BYTES >> 20} MiB of text (an alias bomb?); refused"
_RECURSIVE = "an alias refers to the node that contains it (a recursive alias); refused"


def check_depth(text: str) -> None:
    """Refuse a text nested deeper than MAX_DEPTH before anything composes it (LimitError). What does not parse is
    left to the loader to report: it stops at the same place."""
    if sum(text.count(c) for c in _OPENERS) <= MAX_DEPTH:
        return
    parser = LOADER(text)
    opening = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    closing = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    depth = 0
    try:
        while parser.check_event():
            kind = type(parser.get_event())
            if kind in opening:
                depth += 1
                if depth > MAX_DEPTH:
                    raise LimitError(_TOO_DEEP)
            elif kind in closing:
                depth -= 1
    except LimitError:
        raise
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def expanded(node: yaml.Node) -> tuple[int, int, int]:
    """(nodes, characters of scalars, depth) of `node` once every alias is written out; LimitError past a limit.
    Each node is counted once (memoised), without recursion."""
    known: dict[int, tuple[int, int, int]] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        if done:
            nodes, size, depth = 1, 0, 0
            for child in _children(current):
                child_nodes, child_size, child_depth = known[id(child)]
                nodes += child_nodes
                size += child_size
                depth = max(depth, child_depth)
            depth += 1
            if nodes > MAX_EXPANDED:
                raise LimitError(_TOO_MANY_NODES)
            if size > MAX_EXPANDED_BYTES:
                raise LimitError(_TOO_LARGE)
            if depth > MAX_DEPTH:
                raise LimitError(_TOO_DEEP)
            open_nodes.discard(key)
            known[key] = (nodes, size, depth)
            continue
        if key in known:
            continue
        if isinstance(current, yaml.ScalarNode):
            known[key] = (1, len(current.value), 0)
            continue
        if key in open_nodes:
            raise LimitError(_RECURSIVE)
        open_nodes.add(key)
        stack.append((current, True))
        for child in _children(current):
            child_key = id(child)
            if child_key in open_nodes:
                raise LimitError(_RECURSIVE)
            if child_key not in known:
                stack.append((child, False))
    return known[id(node)]


def expanded_size(node: yaml.Node) -> int:
    """How many nodes `node` is once every alias is written out; LimitError past a limit."""
    return expanded(node)[0]


def _checked_nodes(loader, text: str) -> list[yaml.Node]:
    check_depth(text)
    aliased = "*" in text  # no alias without a "*": nothing to count (the usual case, kustomize output)
    nodes = []
    while loader.check_node():
        node = loader.get_node()
        if node is not None and aliased:
            expanded(node)
        nodes.append(node)
    return nodes


def compose_all(text: str) -> list[yaml.Node]:
    """The documents' nodes (None for an empty one), each checked against the limits."""
    loader = LOADER(text)
    try:
        return _checked_nodes(loader, text)
    finally:
        loader.dispose()


def load_all(text: str) -> list:
    """Like yaml.safe_load_all, with every document checked against the limits before it is built."""
    loader = LOADER(text)
    try:
        return [None if node is None else loader.construct_document(node) for node in _checked_nodes(loader, text)]
    finally:
        loader.dispose()


def load(text: str, loader_class=None):
    """Like yaml.safe_load (one document, None when empty), with the limits."""
    check_depth(text)
    loader = (loader_class or LOADER)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:
            expanded(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def check_text(text: str) -> None:
    """Refuse a text past the limits (LimitError), before a tool that expands its aliases itself (kustomize) or
    recurses over it reads it. What does not parse as YAML is left to that tool to report."""
    try:
        if "*" in text:
            compose_all(text)
        else:
            check_depth(text)
    except LimitError:
        raise
    except yaml.YAMLError:
        return


def check_file(path) -> None:
    """check_text on a file's text; a file that cannot be read (or is not text) is left to the tool that reads it."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return
    check_text(text)
