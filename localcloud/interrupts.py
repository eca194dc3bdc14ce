"""Ctrl-C, `kill` and a closed terminal, handled so that the local cloud never leaves ministack running or its
temporary directory behind, and never prints a half-finished event loop's traceback."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def interrupting() -> Iterator[None]:
    """Inside, SIGTERM and SIGHUP interrupt as Ctrl-C does (KeyboardInterrupt), so `finally` blocks run; by default
    they end the process at once."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def deferred(note: str = "") -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP while the body runs; the first that came is raised again after it. For what
    must not stop half-way: a Pulumi program run (its event loop, interrupted, prints tracebacks) and stopping
    ministack (a second Ctrl-C would leave it running). `note` is printed when a signal is held. Only the main thread
    can handle signals; elsewhere the body just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        if not held and note:
            print(note, flush=True)
        held.append(signum)

    previous = {number: signal.signal(number, hold) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if held:
            signal.raise_signal(held[0])
