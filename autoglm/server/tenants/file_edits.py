"""Changes to a tenants file made in its text, so that everything else the user wrote stays as written:
comments, order, quoting, `role: user` where it is the default, `weight: 2` rather than `2.0`.

YAML's node positions say where the `keys` list and each key's fields sit; a new key is a few lines
inserted after the last one, a revocation one line. The caller checks the edited text reads back as
the file it means to write.
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

KEYS = "keys"
REVOKED = "revoked"


def text_with_key(text: str, key: dict[str, Any]) -> str:
    """`text` with `key` (the fields to write) appended to its `keys` list, which is made if missing."""
    root = _root(text)
    keys = _value_of(root, KEYS)
    if isinstance(keys, SequenceNode) and keys.value and not keys.flow_style:
        # A block sequence starts at its first dash.
        return _insert_after_line_of(text, _content_end(keys), _block_item(key, keys.start_mark.column))
    if keys is None:
        start = text if text.endswith("\n") or not text else text + "\n"
        return start + f"{KEYS}:\n" + _block_item(key, 2)
    listed = [] if isinstance(keys, ScalarNode) else yaml.safe_load(text[keys.start_mark.index:keys.end_mark.index])
    return (text[:keys.start_mark.index].rstrip(" ") + "\n" + _block_item(listed + [key] if listed else key, 2)
            .rstrip("\n") + text[keys.end_mark.index:])


def text_with_key_revoked(text: str, key_id: str) -> str:
    """`text` with the key `key_id` marked `revoked: true`: its value replaced, or a line added to the key."""
    keys = _value_of(_root(text), KEYS)
    entries = keys.value if isinstance(keys, SequenceNode) else []
    entry = next((item for item in entries if isinstance(item, MappingNode)
                  and _scalar(_value_of(item, "id")) == key_id), None)
    if entry is None:
        raise KeyError(key_id)
    revoked = _value_of(entry, REVOKED)
    if revoked is not None:
        return text[:revoked.start_mark.index] + "true" + text[revoked.end_mark.index:]
    if entry.flow_style:
        end = entry.end_mark.index - 1  # before its closing brace
        return text[:end].rstrip() + f", {REVOKED}: true" + text[end:]
    indent = " " * entry.value[0][0].start_mark.column
    return _insert_after_line_of(text, _content_end(entry), f"{indent}{REVOKED}: true\n")


def _root(text: str) -> MappingNode:
    root = yaml.compose(text)
    if not isinstance(root, MappingNode):
        raise ValueError("a tenants file holds a mapping at the top level")
    return root


def _value_of(mapping: MappingNode, name: str) -> Node | None:
    return next((value for key, value in mapping.value if _scalar(key) == name), None)


def _scalar(node: Node | None) -> str | None:
    return node.value if isinstance(node, ScalarNode) else None


def _content_end(node: Node) -> int:
    """Where the last character of `node`'s own text is, before any comment or blank line after it."""
    if isinstance(node, ScalarNode) or node.flow_style or not node.value:
        return node.end_mark.index
    last = node.value[-1]
    return _content_end(last[1] if isinstance(node, MappingNode) else last)


def _insert_after_line_of(text: str, index: int, lines: str) -> str:
    end_of_line = text.find("\n", index)
    if end_of_line == -1:
        return text + "\n" + lines
    return text[:end_of_line + 1] + lines + text[end_of_line + 1:]


def _block_item(entry: dict[str, Any] | list[dict[str, Any]], indent: int) -> str:
    """`entry` as block sequence lines (one item, or each of a list), their dashes `indent` spaces in."""
    items = entry if isinstance(entry, list) else [entry]
    dumped = yaml.safe_dump(items, sort_keys=False, default_flow_style=False)
    return "".join(" " * indent + line for line in dumped.splitlines(keepends=True))
