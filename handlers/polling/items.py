"""How the processor reads one index entry and its item: pure functions of what DynamoDB returned (no AWS call), so
each rule is stated once and every part of the tick (triage, send, settlement) reads an item the same way."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from st_core.errors import PermanentError
from st_core.pending import ATTEMPTS, DUE, SHARD, STATUS, TASK_DUE, TIMED, Status
from st_core.stream import decode_image
from st_core.timeparse import parse_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig, PollingConfig

AWS_ACTIONS: tuple[str, ...] = ()

MODE = "polling"


class Unusable(PermanentError):
    """An item the processor cannot handle as it is (an attribute it cannot read): parked in the poison queue with
    `str(self)` as the reason, naming the attribute and the fix."""

    def __init__(self, attribute: str, problem: str, fix: str) -> None:
        super().__init__(f"attribute {attribute!r}: {problem}; fix: {fix}")


def key_of(raw: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The item's key (typed), from an item or an index entry (both carry the table's key attributes)."""
    return {k: raw[k] for k in names}


def key_identity(raw: dict[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    """The key as a hashable value: an entry and its item read again map to the same one."""
    return tuple((k, *next(iter(raw[k].items()))) for k in names)


def present(raw: dict[str, Any], attribute: str) -> dict[str, Any] | None:
    """The attribute's typed value, None when it is absent or null (`{"NULL": true}`, what boto3 writes for None):
    the assigner reads a null time or delay as none (`decode_image` gives None), so the processor does too."""
    value = raw.get(attribute)
    if not isinstance(value, dict) or value.get("NULL"):
        return None
    return value


def task_due(raw: dict[str, Any]) -> int:
    """The due time of the occurrence an index entry stands for: `stDue` until a failed dispatch moves it (to a
    backoff), then `stTaskDue`. A fraction (a value written by hand) is due at the next whole second, never before
    (exact: a Decimal of DynamoDB's number text, never a float). `Unusable` when it is not a number of epoch seconds
    a datetime can hold."""
    attribute = TASK_DUE if TASK_DUE in raw else DUE
    value = raw.get(attribute)
    fix = (
        "write the item again with its time in the time attribute (ISO-8601 or epoch seconds) and without "
        f"{attribute!r}, or index it with pending_attributes"
    )
    if not isinstance(value, dict) or "N" not in value:
        raise Unusable(attribute, f"is {str(value)[:80]}, not a number of epoch seconds", fix)
    try:
        return int(parse_due(Decimal(value["N"])).timestamp())
    except (PermanentError, ArithmeticError) as exc:
        raise Unusable(attribute, str(exc), fix) from exc


def attempts_of(raw: dict[str, Any]) -> int:
    """The dispatch attempts the item has had (`stAttempts`; none when absent). `Unusable` when not a number."""
    value = raw.get(ATTEMPTS)
    if value is None:
        return 0
    try:
        return int(Decimal(value["N"]))
    except (KeyError, TypeError, ArithmeticError) as exc:
        raise Unusable(
            ATTEMPTS,
            f"is {str(value)[:80]}, not a count",
            f"put the item again without {ATTEMPTS!r} (or with it a whole number), or write it a new time",
        ) from exc


def in_place(item: dict[str, Any], entry: dict[str, Any]) -> bool:
    """The item is still in the index where the entry shows it: the same shard, the same `stDue`."""
    return item.get(DUE) == entry.get(DUE) and item.get(SHARD) == entry.get(SHARD)


def as_indexed(item: dict[str, Any], entry: dict[str, Any]) -> bool:
    """The item is still where the index entry put it: waiting (no settled status), in the same shard at the
    same `stDue`."""
    if item.get(STATUS, {}).get("S") in (Status.DONE.value, Status.FAILED.value):
        return False
    return in_place(item, entry)


def unchanged(item: dict[str, Any], time_attribute: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The condition under which a write settles the occurrence `item` was read as: its `stDue` and its time
    attribute as read. A user's move since (or a PutItem that removed the index attributes) fails it, and the
    item stays for the assigner or the next tick."""
    names = {"#due": DUE, "#time": time_attribute}
    values: dict[str, Any] = {":due": item[DUE]}
    if present(item, time_attribute) is not None:
        values[":time"] = item[time_attribute]
        return "#due = :due AND #time = :time", names, values
    if time_attribute in item:  # written as null: still null (a null is compared by its type, not by `=`)
        values[":null"] = {"S": "NULL"}
        return "#due = :due AND attribute_type(#time, :null)", names, values
    return "#due = :due AND attribute_not_exists(#time)", names, values


def moved(raw: dict[str, Any], config: HandlerConfig) -> int | None:
    """The due time the item's time attribute gives, when it is not the one of the occurrence the index entry
    stands for: the user moved the item since it was indexed (running it now would run it at its old time), or
    a writer indexed it itself (`pending_attributes`) at a time its time attribute does not give. The triage puts it
    back at that time. `Unusable` for a time attribute that cannot be read (the user wrote one since it was indexed,
    or a writer indexed it with one): it has no time to run at."""
    time_attribute = config["timeAttribute"]
    value = present(raw, time_attribute)
    status = raw.get(STATUS, {}).get("S")
    if value is None or (status == Status.RETRY.value and TASK_DUE not in raw):
        return None  # no time attribute; or backed off before `stTaskDue` was kept: its occurrence is unknown
    try:
        at = int(parse_due(decode_image({"t": value})["t"]).timestamp())  # type: ignore[index]
    except PermanentError as exc:
        raise Unusable(
            time_attribute,
            str(exc),
            f"write {time_attribute!r} again as an ISO-8601 time or epoch seconds (the item is indexed again)",
        ) from exc
    return at if at != task_due(raw) else None


def cancelled(raw: dict[str, Any], config: HandlerConfig) -> bool:
    """The item was indexed from its time attribute (`stTimed`) and the attribute is gone: its user removed it
    since, so it is not due at the `stDue` it left behind. An item indexed from a delay or by its writer
    (`pending_attributes`) has no mark: its `stDue` is its time."""
    return TIMED in raw and present(raw, config["timeAttribute"]) is None


def delay_of(raw: dict[str, Any], polling: PollingConfig) -> int | None:
    """The delay (seconds) at which the assigner indexes an item without a time attribute: the item's delay
    attribute, a number of seconds >= 0, or the component's default; None when neither applies (the assigner
    parks such an item)."""
    delay = present(raw, polling["delayAttribute"])
    if delay is None:
        default = polling["defaultDelaySeconds"]
        return None if default is None else int(default)
    try:
        seconds = Decimal(delay["N"]) if "N" in delay else None
    except ArithmeticError:
        return None
    return int(seconds) if seconds is not None and seconds >= 0 else None
