"""Handler configuration documents for tests and benchmarks, written by the component's own function
(`runtime_config.handler_document`, each mode's section from the mode registry) and never by hand: a test names the
options it means (`ScheduledTableArgs` keywords) and the physical names of the resources it made, so the document a
handler runs on in a test is the one a deployment of those options gives it. tests/house/test_handler_configs.py
keeps hand-written documents out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from components import ScheduledTableArgs, modes
from components.runtime_config import Value, handler_document, known_target_arn, needed_values

if TYPE_CHECKING:  # the handlers' own description of the document (handlers/ need not be on the path)
    from st_core.config import HandlerConfig


def handler_config(
    args: ScheduledTableArgs, names: Mapping[Value, str], *, unnamed: str | None = None
) -> HandlerConfig:
    """The document the component writes for `args`, with `names` (by `runtime_config.Value`) the physical names,
    ARNs and URLs of the test's resources; the target's ARN is the args' when they hold it. KeyError naming
    what the test did not make that this configuration needs, unless `unnamed` stands for them (a test that reads
    no such resource); names it does not need are ignored."""
    given = dict(names)
    arn = known_target_arn(args)
    if arn is not None:
        given[Value.TARGET_ARN] = arn
    needed = needed_values(args)
    if unnamed is not None:
        given = {value: unnamed for value in needed} | given
    missing = [str(value) for value in needed if value not in given]
    if missing:
        raise KeyError(f"mode {str(args.mode)!r} needs {missing}: make those resources and name them")
    values: dict[str, str] = {value: given[value] for value in needed}
    return cast("HandlerConfig", json.loads(handler_document(args, values)))


def switched(options: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with `changes`; a change of mode keeps only the options every mode takes (a mode refuses the
    others' options, and aggregate a target), so the new mode's own come from `changes` or its defaults."""
    mode = changes.get("mode", options.get("mode"))
    kept = dict(options)
    if "mode" in options and str(mode) != str(options["mode"]):
        own = {name for every in modes.every() for name in every.options}
        kept = {name: value for name, value in options.items() if name not in own}
        if not modes.by_name(str(mode)).has_target:
            kept.pop("target", None)
    return {**kept, **changes}


def config_of(options: Mapping[str, Any], names: Mapping[Value, str]) -> HandlerConfig:
    """`handler_config` for `ScheduledTableArgs(**options)`."""
    return handler_config(ScheduledTableArgs(**options), names)
