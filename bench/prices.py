"""The AWS list prices the benchmarks turn measured calls into dollars with (`bench_scale`, `herd_model`)."""

from __future__ import annotations

# us-east-1 list prices, on demand. DynamoDB: after AWS's November 2024 reduction (as summarised by airbyte.com's
# DynamoDB pricing guide); the others from the AWS pricing pages as this author knows them. Taken 2026-11-21:
# check them before quoting.
PRICES = {
    "dynamodb_write_unit": 0.625 / 1e6,
    "dynamodb_read_unit": 0.125 / 1e6,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "scheduler_invocation": 1.00 / 1e6,
    "sqs_request": 0.40 / 1e6,
}
PRICE_NOTE = (
    "Prices (us-east-1, on demand, taken 2026-11-21; verify before quoting): DynamoDB $0.625 per million write "
    "units and $0.125 per million read units (after the November 2024 reduction), Lambda $0.20 per million requests "
    "and $0.0000133334 per GB-second (arm64), EventBridge Scheduler $1.00 per million invocations (after 14 million "
    "free a month), SQS $0.40 per million requests. Stream reads by Lambda, TTL deletions and Scheduler's API calls "
    "are free."
)
