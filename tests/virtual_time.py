"""Test-only helper: an event loop with virtual time (not shipped in the wheel).

``run_virtual(main())`` runs a coroutine on a loop whose clock jumps straight to the next timer
whenever nothing is ready, so ``await asyncio.sleep(600)`` takes no wall time and timing is
deterministic. Real I/O still works (it is polled without blocking while timers are pending).

``VirtualClock.wall()`` maps loop time onto an aware UTC datetime, for code that takes a
``now: Callable[[], datetime]``.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


class VirtualClock:
    def __init__(self, start: float = 0.0, wall_epoch: datetime = EPOCH) -> None:
        self.now = start
        self.wall_epoch = wall_epoch

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds

    def wall(self) -> datetime:
        return self.wall_epoch + timedelta(seconds=self.now)


class _VirtualSelector(selectors.BaseSelector):
    """Delegates I/O to a real selector but never sleeps: a timeout advances the clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            return self._real.select(None)  # nothing scheduled: block on real I/O
        ready = self._real.select(0)
        if not ready:
            self._clock.advance(timeout)
        return ready

    def close(self) -> None:
        self._real.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        super().__init__(selector=_VirtualSelector(self.clock))

    def time(self) -> float:
        return self.clock.now


def run_virtual(main: Coroutine[Any, Any, T], *, clock: VirtualClock | None = None) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualTimeLoop`."""
    loop = VirtualTimeLoop(clock)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def virtual_clock() -> VirtualClock:
    """The clock of the running VirtualTimeLoop."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, VirtualTimeLoop):
        raise RuntimeError("not running on a VirtualTimeLoop")
    return loop.clock
