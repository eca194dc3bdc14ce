"""The modes and the other small enumerations every part of the component speaks of: a leaf module (it imports nothing
of the component), so the options, the handler's config document and the builders can all use them without a cycle."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["KeyType", "LambdaArchitecture", "Mode", "ModeName"]


class Mode(StrEnum):
    EVENTBRIDGE = "eventbridge"
    TTL = "ttl"
    POLLING = "polling"
    AGGREGATE = "aggregate"


ModeName = Literal["eventbridge", "ttl", "polling", "aggregate"]
KeyType = Literal["S", "N", "B"]
LambdaArchitecture = Literal["arm64", "x86_64"]
