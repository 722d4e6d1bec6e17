"""Block-style YAML without PyYAML (not a dependency of the package)."""

from __future__ import annotations

import json
import re
from typing import Any, List

# A string that YAML reads back as the same string when written bare.
_PLAIN = re.compile(r"(?:[A-Za-z/_]|-[-A-Za-z])[A-Za-z0-9_./=:,@+-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def to_yaml(documents: List[Any]) -> str:
    """Block-style YAML, one `---` document per object (dicts, lists, str, int, bool)."""
    return "".join("---\n" + "\n".join(_lines(doc)) + "\n" for doc in documents)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict) and not value:
        return "{}"
    if isinstance(value, list) and not value:
        return "[]"
    if not isinstance(value, str):
        raise TypeError(f"to_yaml writes str, int, bool, dict and list, not {value!r}")
    if _PLAIN.fullmatch(value) and not value.endswith(":") and value.lower() not in _YAML_WORDS:
        return value
    if "'" not in value and value.isprintable():
        return f"'{value}'"  # single-quoted: nothing inside is special
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def _is_block(value: Any) -> bool:
    return isinstance(value, (dict, list)) and bool(value)


def _lines(node: Any) -> List[str]:
    lines: List[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if _is_block(value):
                lines.append(f"{_scalar(key)}:")
                lines += ["  " + line for line in _lines(value)]
            else:
                lines.append(f"{_scalar(key)}: {_scalar(value)}")
    elif isinstance(node, list):
        for item in node:
            if _is_block(item):
                first, *rest = _lines(item)
                lines.append("- " + first)
                lines += ["  " + line for line in rest]
            else:
                lines.append(f"- {_scalar(item)}")
    else:
        lines.append(_scalar(node))
    return lines
