"""Redrive from the stream DLQ: each failed batch's records read again from the stream and re-run."""

from __future__ import annotations

import json
from typing import Any

from ...packaging import error_code
from ..aws import Client
from .discovery import RedriveError, Stack
from .matcher import passes
from .ordering import judge
from .queues import Queue
from .records import item_identity, lambda_shape, record_keys, sequence_order
from .replay import replay
from .report import EVERYTHING, Report, Selection, short

# GetRecords pages read for one failure record's range before giving up on reaching its end.
MAX_EMPTY_PAGES = 20
# Errors that mean the stream no longer holds a range: records older than 24 h are trimmed; a shard or stream that
# is gone (the table's stream disabled or replaced) takes its records with it.
EXPIRED_CODES = ("TrimmedDataAccessException", "ResourceNotFoundException", "ExpiredIteratorException")


class Expired(Exception):
    """The stream no longer holds the range (DynamoDB Streams keeps records for 24 hours)."""


def read_range(client: Client, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one on-failure record's range, in Lambda's shape, read from the stream while it holds them."""
    streams = client("dynamodbstreams")
    stream_arn, shard = str(info["streamArn"]), str(info["shardId"])
    start, end = str(info["startSequenceNumber"]), int(str(info["endSequenceNumber"]))
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=start
        ).get("ShardIterator")
        records: list[dict[str, Any]] = []
        empty = 0
        while iterator and empty < MAX_EMPTY_PAGES:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            got = page.get("Records", [])
            empty = 0 if got else empty + 1
            for record in got:
                if sequence_order(record) > end:
                    return records
                records.append(lambda_shape(record, stream_arn))
                if sequence_order(record) == end:
                    return records
            iterator = page.get("NextShardIterator")
    except Exception as error:
        if error_code(error) in EXPIRED_CODES:
            raise Expired(f"{error_code(error)}: {short(str(error), 160)}") from error
        raise
    if records and sequence_order(records[-1]) >= end:
        return records
    raise Expired(f"the shard ended before sequence number {end} ({len(records)} records read)")


def stream_dlq(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Re-invoke the consumer with each failed batch's records, read again from the stream; the message is deleted
    once every record of its range succeeded (or was parked with a reason: the poison queue has it then)."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    if stack.stream_dlq_url is None:
        raise RedriveError(f"{stack.function} has no event source mapping with an on-failure destination")
    queue = Queue(client, stack.stream_dlq_url, wait_seconds=wait_seconds)
    taken = 0
    try:
        for message in queue.messages():
            if limit is not None and taken >= limit:
                break
            try:
                body = json.loads(message.body)
                info = body["DDBStreamBatchInfo"]
                what = f"shard {info['shardId']} {info['startSequenceNumber']}..{info['endSequenceNumber']}"
            except (ValueError, KeyError, TypeError):
                report.line("cannot replay", f"message {message.id}", "not a DynamoDB stream on-failure record")
                continue
            context = body.get("requestContext") or {}
            why = f"{context.get('condition')}; {(body.get('responseContext') or {}).get('functionError')}"
            if reason is not None and not reason.search(why):
                continue
            taken += 1
            what += f" ({info.get('batchSize')} records from {info.get('approximateArrivalOfFirstRecord')})"
            try:
                records = read_range(client, info)
            except Expired as gone:
                report.line("expired", what, f"the stream no longer holds this range (kept: 24 h retention): {gone}")
                continue
            passing = [r for r in records if passes(stack.filters, r)]
            newest: dict[str, int] = {}
            for record in passing:
                newest[item_identity(record)] = max(newest.get(item_identity(record), 0), sequence_order(record))
            verdicts = [judge(client, stack, r, newest[item_identity(r)]) for r in passing]
            chosen = [r for v in verdicts for r in v.records]
            counted = f"{len(passing)} of {len(records)} records pass the mapping's filter"
            partly = sum(1 for v in verdicts if v.send is not None and not v.whole)
            if partly:
                counted += f", {partly} replayed only for the due time they left (the item changed after them)"
            if len(chosen) < len(passing):
                counted += f", {len(passing) - len(chosen)} superseded by the item's later changes (not replayed)"
            if dry_run:
                report.line("would replay", what, f"{counted}; {why}")
                continue
            settled = replay(client, stack.function, chosen)
            if settled.failed:
                record, failure = settled.failed[0]
                report.line("failed", what, f"{len(settled.failed)} failed, first {record_keys(record)}: {failure}")
                continue
            queue.delete(message)
            report.line("replayed", what, counted)
        return report
    finally:
        queue.release()
