"""Pure ARN helpers: account and region come from ARNs the stack already has, so no lookups are needed."""

from __future__ import annotations

import re
from email.utils import parseaddr

# Under mocks that echo a resource's inputs back as its outputs (the minimal mocks of Pulumi's unit-testing guide),
# every ARN the provider would compute is None. The component then builds its policies from this placeholder, so a
# user's unit test of their own program does not crash inside ours. A real deployment never has a None ARN.
UNKNOWN_ARN = "arn:aws:unknown:unknown:000000000000:unknown"


def arn_parts(arn: str | None) -> tuple[str, str, str, str, str]:
    """(partition, service, region, account, resource) of an ARN; ValueError for anything else."""
    parts = (arn or UNKNOWN_ARN).split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(f"not an ARN: {arn!r}")
    return parts[1], parts[2], parts[3], parts[4], parts[5]


def schedules_in_group(group_arn: str | None) -> str:
    """`arn:...:schedule-group/G` -> `arn:...:schedule/G/*`, the ARN pattern of every schedule in that group."""
    partition, service, region, account, resource = arn_parts(group_arn)
    if group_arn is None:
        resource = "schedule-group/unknown"
    if not resource.startswith("schedule-group/"):
        raise ValueError(f"not a schedule group ARN: {group_arn!r}")
    group = resource.removeprefix("schedule-group/")
    return f"arn:{partition}:{service}:{region}:{account}:schedule/{group}/*"


def dns_suffix(partition: str) -> str:
    """The domain of a partition's service endpoints (`sqs.cn-north-1.amazonaws.com.cn` in China)."""
    return "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"


def via_service(service: str, arn: str | None) -> str:
    """The value of `kms:ViaService` when `service` uses a key of `arn`'s region on a caller's behalf: that service's
    endpoint there (`dynamodb.eu-west-1.amazonaws.com`). A service uses a key of its own region only, so the key's
    ARN tells it (AWS KMS developer guide, "kms:ViaService")."""
    partition, _, region, _, _ = arn_parts(arn)
    return f"{service}.{region}.{dns_suffix(partition)}"


def email_address(sender: str) -> str:
    """The bare address of a sender written either way: `r@example.com` or `Reminders <r@example.com>`."""
    return parseaddr(sender)[1]


def ses_identity_arns(home_arn: str | None, sender: str) -> list[str]:
    """The SES identities a sender may be verified as: the (bare) address itself and its domain, in the deploying
    account and region (`home_arn`: any ARN there)."""
    partition, _, region, account, _ = arn_parts(home_arn)
    address = email_address(sender)
    domain = address.rsplit("@", 1)[-1]
    return [f"arn:{partition}:ses:{region}:{account}:identity/{name}" for name in (address, domain)]


def ses_configuration_set_arn(table_arn: str | None, name: str) -> str:
    """The ARN of an SES configuration set, which SES also authorizes a SendEmail naming it on."""
    partition, _, region, account, _ = arn_parts(table_arn)
    return f"arn:{partition}:ses:{region}:{account}:configuration-set/{name}"


# arn:<partition>:kms:<region>:<account>:key/<key id>; not an alias (`alias/x`, `...:alias/x`) nor a bare key id.
KMS_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d+:key/[A-Za-z0-9-]+")
KMS_KEY_EXAMPLE = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def kms_key_problem(field_name: str, value: str) -> str | None:
    """Why `value` cannot be the KMS key ARN option `field_name` (None if it can). The roles are granted kms:
    actions on it, and IAM matches those on the key's ARN only: an alias or key id would grant nothing (or be
    refused as a policy resource). The same message for a plain string and for an Output once it resolves."""
    if KMS_KEY_ARN.fullmatch(value):
        return None
    return (
        f"{field_name}: {value!r} is not a KMS key ARN; pass the key's `.arn` (arn:aws:kms:<region>:<account>:key/"
        f"<key id>), e.g. {KMS_KEY_EXAMPLE!r}: IAM grants kms: actions on the key's ARN, not on an alias or a key id"
    )
