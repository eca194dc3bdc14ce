"""`{attribute}` templates filled from an item's attributes, for email subjects and bodies.

Deliberately not `str.format`: a format string can reach Python attributes (`{x.__class__}`), and attribute names
in DynamoDB may contain dots. `{{` and `}}` stand for literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import PermanentError

# A pattern, not a compiled one: only email targets render templates, so other modes never pay for compiling it
# at import; `re` compiles it on first use and keeps it in its cache.
_TOKEN = r"\{\{|\}\}|\{([^{}]*)\}|[{}]"


def template_fields(template: str) -> list[str]:
    """The attribute names a template needs, in order; raises ValueError for a stray or empty brace."""
    fields: list[str] = []
    for match in re.finditer(_TOKEN, template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        name = match.group(1)
        if name is None or not name.strip():
            raise ValueError(f"stray or empty brace at position {match.start()} (write {{{{ or }}}} for a literal)")
        fields.append(name.strip())
    return fields


def render(template: str, item: Mapping[str, Any]) -> str:
    """The template with each `{name}` replaced by the item's attribute; a missing one is a PermanentError."""
    try:
        fields = template_fields(template)
    except ValueError as exc:
        raise PermanentError(f"invalid template: {exc}") from exc
    missing = [name for name in fields if item.get(name) is None]
    if missing:
        raise PermanentError(f"template needs attribute(s) {', '.join(sorted(set(missing)))} that the item lacks")

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return _text(item[match.group(1).strip()])

    return re.sub(_TOKEN, substitute, template)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    return str(value)
