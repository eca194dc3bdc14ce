"""FIFO targets (SQS queues and SNS topics whose names end in `.fifo`): each message's group and deduplication id,
derived from the occurrence and the due event, the same whoever sends it and however often."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from . import constants
from .jsontext import dumps

if TYPE_CHECKING:
    from .config import TargetConfig


def is_fifo(arn: str) -> bool:
    """SQS and SNS name every FIFO queue or topic, and only those, with the `.fifo` suffix."""
    return arn.endswith(".fifo")


def sqs_token(text: str) -> str:
    """`text` as a FIFO message group or deduplication id: itself when SQS and SNS take it (1-128 characters, each
    alphanumeric or punctuation, i.e. printable ASCII but space), otherwise its SHA-256 in hex."""
    if 0 < len(text) <= constants.SQS_FIFO_ID_CHARS and all("!" <= c <= "~" for c in text):
        return text
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def deduplication_id(occurrence: str) -> str:
    """One id per occurrence, whoever sends it and however often: the queue or topic keeps only the first within
    its 5-minute deduplication interval. The occurrence's id itself (`naming.occurrence_id` always fits), so the
    message's deduplication id is the due event's `occurrenceId`; hashed only for a name SQS would refuse."""
    return sqs_token(occurrence)


def message_group(target: TargetConfig, payload: str) -> str:
    """The FIFO message group of a due event (`payload`, the text `dispatch.target_input` made): the configured
    fixed group; else the item's group attribute; else, by default and for an item without that attribute, the
    item's keys, so each item's occurrences stay in order and different items never wait for each other."""
    fixed = target.get("messageGroupId")
    if fixed:
        return fixed
    # Decimals, so a number's text (and so the group) is the same however it was written.
    event = json.loads(payload, parse_float=Decimal, parse_int=Decimal)
    for value in group_attribute(target, event.get("item") or {}).values():
        return sqs_token(value if isinstance(value, str) else dumps(value))
    return sqs_token(dumps(event.get("keys") or {}))


def group_attribute(target: TargetConfig, item: dict[str, Any]) -> dict[str, Any]:
    """The item's message group attribute, if the target groups by one and the item has it (an empty string or
    null counts as missing: SQS takes no empty group)."""
    attribute = target.get("messageGroupAttribute")
    if not attribute or item.get(attribute) in (None, ""):
        return {}
    return {attribute: item[attribute]}


def fifo_parameters(target: TargetConfig, payload: str, occurrence: str) -> dict[str, str]:
    """What a send to a FIFO queue or topic adds (its message group and deduplication id); nothing for another."""
    if not is_fifo(target["arn"]):
        return {}
    return {"MessageGroupId": message_group(target, payload), "MessageDeduplicationId": deduplication_id(occurrence)}
