"""Loading YAML from the repository with aliases limited: an alias bomb is refused before it is expanded.

YAML aliases (`*name`) repeat an anchored node (`&name`). PyYAML shares the repeated node, so loading
a "billion laughs" document is quick, but everything that walks the result afterwards (schema checks,
rules, masking, the diff) walks every repetition: nine nested levels of ten aliases are 10^9 nodes.
Each document is composed first (a graph of nodes, aliases shared), its expanded size is counted on
that graph (each node once, memoised), and a document over MAX_EXPANDED nodes, or one whose aliases
refer to themselves, is refused with one line before anything is constructed.
"""

from __future__ import annotations

import yaml

# libyaml's loader, where PyYAML was built with it, parses about ten times faster.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Nodes a document may expand to. The largest pinned CRD schema (kubeflow's MPIJob, with all of the pod
# template) is about 10,000 nodes expanded; a rendered environment's largest document is far smaller.
MAX_EXPANDED = 1_000_000


class AliasLimitError(yaml.YAMLError):
    """A document whose aliases expand beyond MAX_EXPANDED nodes, or refer to themselves."""


def expanded_size(node: yaml.Node) -> int:
    """How many nodes `node` is once every alias is written out; AliasLimitError past the limit."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(current: yaml.Node) -> int:
        key = id(current)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise AliasLimitError("an alias refers to the node that contains it (a recursive alias); refused")
        total = 1
        if isinstance(current, (yaml.SequenceNode, yaml.MappingNode)):
            open_nodes.add(key)
            if isinstance(current, yaml.SequenceNode):
                children = current.value
            else:
                children = [node for pair in current.value for node in pair]
            for child in children:
                total += size(child)
                if total > MAX_EXPANDED:
                    raise AliasLimitError(
                        f"its aliases expand to more than {MAX_EXPANDED:,} nodes (an alias bomb?); refused"
                    )
            open_nodes.discard(key)
        sizes[key] = total
        return total

    try:
        return size(node)
    except RecursionError:
        raise AliasLimitError("nested too deeply to read; refused") from None


def _checked_nodes(loader, text: str) -> list[yaml.Node]:
    aliased = "*" in text  # no alias without a "*": nothing to count (the usual case, kustomize output)
    nodes = []
    while loader.check_node():
        node = loader.get_node()
        if node is not None and aliased:
            expanded_size(node)
        nodes.append(node)
    return nodes


def compose_all(text: str) -> list[yaml.Node]:
    """The documents' nodes (None for an empty one), each checked against the alias limit."""
    loader = LOADER(text)
    try:
        return _checked_nodes(loader, text)
    finally:
        loader.dispose()


def load_all(text: str) -> list:
    """Like yaml.safe_load_all, with every document checked against the alias limit before it is built."""
    loader = LOADER(text)
    try:
        return [None if node is None else loader.construct_document(node) for node in _checked_nodes(loader, text)]
    finally:
        loader.dispose()


def load(text: str, loader_class=None):
    """Like yaml.safe_load (one document, None when empty), with the alias limit."""
    loader = (loader_class or LOADER)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:
            expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def check_file(path) -> None:
    """Refuse a file whose YAML aliases expand past the limit, before a tool that expands them (kustomize)
    reads it. What does not parse as YAML (or is not text) is left to that tool to report."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return
    if "*" not in text:
        return
    try:
        compose_all(text)
    except AliasLimitError:
        raise
    except yaml.YAMLError:
        return
