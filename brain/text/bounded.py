"""Configuration files read with bounds: a file past its size limit, or YAML whose aliases expand past a
node limit, is refused before it costs minutes and gigabytes (a few hundred bytes of nested YAML aliases
describe billions of nodes; a persona is a few kilobytes, not megabytes).

The callers turn :class:`TooLarge` into their own error, naming the file and the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TooLarge(ValueError):
    """A file or document past its limit; the message says which limit and by how much."""


def read_bounded_bytes(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` (read no further than one byte past it, so a huge
    file or an endless device costs nothing). Raises :class:`TooLarge`, or the OSError of reading it."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"it is larger than {max_bytes:,} bytes")
    return data


def read_bounded_text(path: str | Path, max_bytes: int) -> str:
    """The UTF-8 text of ``path``, at most ``max_bytes`` bytes (see :func:`read_bounded_bytes`). Raises
    :class:`TooLarge`, or the OSError / UnicodeDecodeError of reading and decoding it."""
    return read_bounded_bytes(path, max_bytes).decode("utf-8")


#: how deeply YAML collections may nest (PyYAML scans deep flow nesting in quadratic time, and composes
#: and constructs recursively)
MAX_YAML_DEPTH = 100


def load_yaml_bounded(text: str, max_nodes: int, max_depth: int = MAX_YAML_DEPTH) -> object:
    """``yaml.safe_load(text)``, refusing a document nested deeper than ``max_depth`` while it is scanned,
    and one whose nodes, every alias counted as the nodes it stands for, are more than ``max_nodes`` (or
    that refers to itself through an alias) before any object is built. Raises :class:`TooLarge`, or
    ``yaml.YAMLError`` for text that is not YAML."""
    import yaml

    too_deep = f"it is nested more than {max_depth} levels deep"

    class Loader(yaml.SafeLoader):
        def fetch_flow_collection_start(self, TokenClass: object) -> None:  # "[" or "{"
            if self.flow_level >= max_depth:
                raise TooLarge(too_deep)
            super().fetch_flow_collection_start(TokenClass)

        def add_indent(self, column: int) -> bool:  # a block collection one level deeper
            if len(self.indents) >= max_depth:
                raise TooLarge(too_deep)
            return super().add_indent(column)

        def get_single_node(self) -> yaml.Node | None:  # composed (aliases are shared nodes), not yet constructed
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node, max_nodes)
            return node

    loader = Loader(text)
    try:
        return loader.get_single_data()
    except RecursionError:  # PyYAML composes and constructs recursively
        raise TooLarge(too_deep) from None
    finally:
        loader.dispose()


def _check_expansion(root: object, max_nodes: int) -> None:
    """Count the nodes of ``root`` with every alias expanded (each shared node counted once per use, its
    count computed once), iteratively: deep nesting costs no recursion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > max_nodes:
                raise TooLarge(f"its aliases expand to more than {max_nodes:,} nodes")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise TooLarge("an alias refers to a node that contains it (a recursive structure)")
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) not in sizes:
                if id(child) in open_nodes:
                    raise TooLarge("an alias refers to a node that contains it (a recursive structure)")
                stack.append((child, False))


def _children(node: object) -> list[object]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


__all__ = ["MAX_YAML_DEPTH", "TooLarge", "load_yaml_bounded", "read_bounded_bytes", "read_bounded_text"]
