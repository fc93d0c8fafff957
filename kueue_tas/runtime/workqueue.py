"""An asyncio work queue with client-go's guarantees.

- A key is queued at most once: adding a queued key again is a no-op (deduplication).
- A key is never handed to two workers at once: a key added while it is being processed is
  remembered ("dirty") and queued again when the worker calls :meth:`WorkQueue.done`.
- :meth:`WorkQueue.add_after` queues a key after a delay (the earliest pending time wins).
- :meth:`WorkQueue.add_rate_limited` requeues with per-key exponential backoff;
  :meth:`WorkQueue.forget` resets it once the key succeeds.
- :meth:`WorkQueue.run` drives ``workers`` concurrent handlers; :meth:`WorkQueue.shut_down`
  stops it (optionally after draining what is queued).

Timers use the running loop's clock (``loop.call_at``), so tests can drive them with the
virtual-time loop of ``tests/virtual_time.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from kueue_tas.runtime.logging import get_logger

K = TypeVar("K", bound=Hashable)

log = get_logger(__name__)

# A handler returns None when done, or a number of seconds after which to look at the key again.
Handler = Callable[[K], Awaitable[float | None]]


class ShutDown(Exception):
    """The queue was shut down; no more keys will be handed out."""


class ExponentialBackoff(Generic[K]):
    """Per-key delay ``base * 2**failures``, capped at ``maximum`` (client-go's
    ItemExponentialFailureRateLimiter)."""

    def __init__(self, base: float = 0.005, maximum: float = 1000.0) -> None:
        if base <= 0 or maximum < base:
            raise ValueError(f"need 0 < base <= maximum, got base={base} maximum={maximum}")
        self.base = base
        self.maximum = maximum
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        if n >= 64:  # 2**64 * base overflows any useful range
            return self.maximum
        return float(min(self.base * (2**n), self.maximum))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class WorkQueue(Generic[K]):
    """See the module docstring. Must be used from one event loop."""

    def __init__(self, name: str = "queue", *, rate_limiter: ExponentialBackoff[K] | None = None) -> None:
        self.name = name
        self.rate_limiter: ExponentialBackoff[K] = rate_limiter or ExponentialBackoff()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()  # queued, or re-added while processing
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drain = False
        self._idle = asyncio.Event()
        self._idle.set()
        # delayed adds
        self._waiting: dict[K, float] = {}  # key -> earliest ready time
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None

    # ---- inspection ------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of keys waiting to be handed out (not counting delayed or in-process keys)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def num_processing(self) -> int:
        return len(self._processing)

    def num_waiting(self) -> int:
        """Keys scheduled by add_after / add_rate_limited and not yet due."""
        return len(self._waiting)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    # ---- adding ----------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._idle.clear()
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), key))
        self._idle.clear()
        self._arm_timer(loop)

    def add_rate_limited(self, key: K) -> None:
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        self.rate_limiter.forget(key)

    # ---- consuming -------------------------------------------------------------------------------

    async def get(self) -> K:
        """The next key (now owned by the caller until :meth:`done`). Raises ShutDown."""
        while not self._queue or (self._shutting_down and not self._drain):
            if self._shutting_down:
                raise ShutDown(self.name)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # we were woken for an item: pass the wake-up on
                else:
                    with contextlib.suppress(ValueError):
                        self._getters.remove(fut)
                raise
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            if self._shutting_down and not self._drain:
                self._dirty.discard(key)
            else:
                self._queue.append(key)
                self._wake_one()
        self._update_idle()

    # ---- lifecycle -------------------------------------------------------------------------------

    def shut_down(self, *, drain: bool = False) -> None:
        """Stop handing out keys. ``drain=True``: keys already queued are still processed;
        delayed keys are dropped either way. Idempotent."""
        if self._shutting_down:
            return
        self._shutting_down = True
        self._drain = drain
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
        self._waiting.clear()
        self._heap.clear()
        if not drain:
            self._dirty.difference_update(self._queue)
            self._queue.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
        self._update_idle()

    async def wait_idle(self) -> None:
        """Wait until nothing is queued, delayed or processing (useful in tests)."""
        await self._idle.wait()

    async def run(self, workers: int, handler: Handler[K]) -> None:
        """Process keys with ``workers`` concurrent calls of ``handler`` until shut down.

        ``handler(key)`` returning None forgets the key's backoff; returning seconds requeues it
        after that delay; raising requeues it rate-limited. Cancelling ``run`` cancels the
        workers and shuts the queue down.
        """
        if workers < 1:
            raise ValueError("workers must be >= 1")
        tasks = [asyncio.create_task(self._worker(handler), name=f"{self.name}-worker-{i}") for i in range(workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.shut_down()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self, handler: Handler[K]) -> None:
        while True:
            try:
                key = await self.get()
            except ShutDown:
                return
            try:
                after = await handler(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning(
                    "reconcile_failed",
                    queue=self.name,
                    key=str(key),
                    error=f"{type(e).__name__}: {e}",
                    requeues=self.rate_limiter.num_requeues(key),
                    exc_info=True,
                )
                self.add_rate_limited(key)
            else:
                self.forget(key)
                if after is not None:
                    self.add_after(key, after)
            finally:
                self.done(key)

    # ---- internals -------------------------------------------------------------------------------

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _update_idle(self) -> None:
        if not self._queue and not self._processing and not self._waiting:
            self._idle.set()

    def _arm_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._heap:
            return
        first = self._heap[0][0]
        if self._timer is not None and self._timer_at is not None and self._timer_at <= first:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = first
        self._timer = loop.call_at(first, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._timer_at = None
        now = loop.time()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) != ready_at:
                continue  # superseded by an earlier add_after
            del self._waiting[key]
            self.add(key)
        self._arm_timer(loop)
        self._update_idle()
