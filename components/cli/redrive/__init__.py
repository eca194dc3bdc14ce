"""Getting parked work back after a fix: the poison queue, the stream DLQ and the target DLQ of one ScheduledTable.

Pure logic over injected boto3 clients (`client(service)`), so it runs against AWS, the local cloud and moto alike;
`cli/command.py` is the thin command around it. Everything is found from the consumer function alone: its
`SCHEDULED_TABLE_CONFIG` names the poison queue, the target and the target DLQ; its event source mapping names the
stream DLQ (the on-failure destination) and the filter the records passed.

Replays go through the deployed consumer itself (a synthetic stream batch, invoked RequestResponse), so a redriven
record meets the same code, the same ledger and the same exactly-once checks as a redelivered one: a record that
had in fact been applied is not applied again. Lambda hands the consumer an item's records in order and the
handlers rely on it; a redrive comes after later records were applied, so it replays a record whole only while it
is its item's latest change, and otherwise only what it says of the due time the item left (`judge`). Second
precision's target dead letters go back into the release queue, never straight to the target (`target.py`).
A message is deleted only once what it holds succeeded; anything else stays in its queue, visible again when the
run ends.
"""

from __future__ import annotations
