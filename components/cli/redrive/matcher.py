"""Which stream records the event source mapping's filter lets through: a redrive replays only those."""

from __future__ import annotations

from typing import Any


def matches(pattern: object, value: object, present: bool = True) -> bool:
    """Lambda's event filtering (EventBridge pattern syntax) for what the component's filters use: lists of exact
    values, `{"exists": bool}`, `{"prefix": text}`, nested objects, `"$or"` (a list of patterns for the same object,
    any one of which must match besides its other fields). Anything else raises, rather than replaying records the
    mapping would not have let through."""
    if isinstance(pattern, dict):
        fields = {k: p for k, p in pattern.items() if k != "$or"}
        if "$or" in pattern:
            alternatives = pattern["$or"]
            if not isinstance(alternatives, list) or not alternatives:
                raise ValueError(f"unsupported filter pattern {pattern!r}")
            if not any(matches(alternative, value, present) for alternative in alternatives):
                return False
        if not isinstance(value, dict):
            return all(_absent_ok(p) for p in fields.values()) if not present or value is None else False
        return all(matches(p, value.get(k), k in value) for k, p in fields.items())
    if isinstance(pattern, list):
        candidates = value if isinstance(value, list) else [value]
        return any(_leaf(rule, candidate, present) for rule in pattern for candidate in candidates or [None])
    raise ValueError(f"unsupported filter pattern {pattern!r}")


def _absent_ok(pattern: object) -> bool:
    """Whether a pattern matches a field that is not there (only `exists: false` does)."""
    if isinstance(pattern, dict):
        fields = [p for k, p in pattern.items() if k != "$or"]
        either = "$or" not in pattern or any(_absent_ok(a) for a in pattern["$or"])
        return either and all(_absent_ok(p) for p in fields)
    return isinstance(pattern, list) and any(isinstance(r, dict) and r.get("exists") is False for r in pattern)


def _leaf(rule: object, value: object, present: bool) -> bool:
    if isinstance(rule, dict):
        if set(rule) == {"exists"}:
            exists = present and value is not None and not isinstance(value, dict)
            return exists is bool(rule["exists"])
        if set(rule) == {"prefix"}:
            return present and isinstance(value, str) and value.startswith(str(rule["prefix"]))
        raise ValueError(f"unsupported filter rule {rule!r}")
    return present and value == rule


def passes(filters: list[dict[str, Any]], record: dict[str, Any]) -> bool:
    """No filter lets everything through; otherwise any one pattern must match (Lambda ORs them)."""
    return not filters or any(matches(f, record) for f in filters)
