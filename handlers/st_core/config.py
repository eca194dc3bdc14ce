"""The handler configuration: one JSON document in SCHEDULED_TABLE_CONFIG, written by the component."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import TYPE_CHECKING

from .constants import CONFIG_VARIABLE

if TYPE_CHECKING:
    from .shapes import (
        AggregateConfig as AggregateConfig,
    )
    from .shapes import (
        EmailConfig as EmailConfig,
    )
    from .shapes import (
        EventBridgeConfig as EventBridgeConfig,
    )
    from .shapes import (
        HandlerConfig as HandlerConfig,
    )
    from .shapes import (
        PollingConfig as PollingConfig,
    )
    from .shapes import (
        ReleaseConfig as ReleaseConfig,
    )
    from .shapes import (
        SchedulerConfig as SchedulerConfig,
    )
    from .shapes import (
        TargetConfig as TargetConfig,
    )
    from .shapes import (
        TtlConfig as TtlConfig,
    )

# The shapes, by name, for whoever asks at run time (the handlers import them for the type checker only).
SHAPES = frozenset(
    {
        "EmailConfig",
        "TargetConfig",
        "SchedulerConfig",
        "ReleaseConfig",
        "EventBridgeConfig",
        "TtlConfig",
        "PollingConfig",
        "AggregateConfig",
        "HandlerConfig",
    }
)


def __getattr__(name: str) -> object:
    """`st_core.config.TargetConfig` and the other shapes, built on first use: see st_core/shapes.py for why."""
    if name in SHAPES:
        from . import shapes

        return getattr(shapes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@lru_cache(maxsize=1)
def load_config() -> HandlerConfig:
    """Parsed once per container; a missing or broken document is a deployment error, so it fails loudly."""
    raw = os.environ.get(CONFIG_VARIABLE)
    if not raw:
        raise RuntimeError(f"{CONFIG_VARIABLE} is not set: this function must be deployed by ScheduledTable")
    config: HandlerConfig = json.loads(raw)
    return config
