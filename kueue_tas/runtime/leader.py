"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's algorithm, written here
because ``kubernetes_asyncio.leaderelection`` writes local naive times with a ``Z``, does not
maintain ``leaseTransitions`` and never releases).

- A candidate takes the Lease when it does not exist, has no holder, or is expired
  (``renewTime + leaseDurationSeconds`` before now, UTC). Taking it over from someone else
  increments ``leaseTransitions`` and sets ``acquireTime``.
- The leader renews every ``retry_period``. If no renewal has succeeded for ``renew_deadline``
  (counted from the moment the last successful renewal was *sent*), it stops acting: ``is_leader``
  turns false, the leading task is cancelled and awaited, and :class:`LeaderElectionLost` is
  raised. Because ``renew_deadline < lease_duration``, this happens before anyone else may take
  the Lease. The caller should exit the process (as controller-runtime does).
- Every write is a PUT with the last seen ``resourceVersion``; a 409 means someone else wrote
  first, so the Lease is read again.
- On graceful shutdown (``run`` cancelled) or when the leading coroutine returns, the Lease is
  released (holder cleared, duration 1 s) so that a standby takes over at its next retry.

Safety assumes the electors' clocks agree to well within ``lease_duration - renew_deadline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from kubernetes_asyncio import client as k8s

from kueue_tas.kube.errors import Conflict, NotFound, TooManyRequests, retry_after
from kueue_tas.kube.lease import KubeLeaseApi, LeaseApi, LeaseRecord
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)

ElectorState = Literal["disabled", "standby", "leader", "stopped"]


class LeaderElectionLost(Exception):
    """Leadership could not be renewed in time (or another holder took the Lease)."""


def default_identity() -> str:
    """``<POD_NAME or hostname>_<random>``: unique per process, readable in ``kubectl get lease``."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    def __init__(
        self,
        client: k8s.ApiClient | LeaseApi,
        settings: Settings,
        identity: str | None = None,
        *,
        now: Callable[[], datetime] | None = None,
        jitter: float = 0.2,
        rng: random.Random | None = None,
        release_on_cancel: bool = True,
    ) -> None:
        self.api: LeaseApi = KubeLeaseApi(client) if isinstance(client, k8s.ApiClient) else client
        self.settings = settings
        self.identity = identity or default_identity()
        self.namespace = settings.lease_namespace
        self.name = settings.lease_name
        self.enabled = settings.leader_election
        self.lease_duration = settings.lease_duration_seconds
        self.renew_deadline = settings.renew_deadline_seconds
        self.retry_period = settings.retry_period_seconds
        self._now = now or (lambda: datetime.now(UTC))
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._release_on_cancel = release_on_cancel
        self._state: ElectorState = "disabled" if not self.enabled else "standby"
        self._is_leader = False
        self._observed: LeaseRecord | None = None
        self._last_renew: float | None = None  # loop time at which the last successful write was sent
        self._throttled = 0.0  # a 429's Retry-After: how long a candidate waits before trying again
        self._running = False
        self._led = False  # has led at least once: from then on, writes need a live Lease

    # ---- state -----------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def state(self) -> ElectorState:
        return self._state

    def may_write(self) -> bool:
        """Whether this process may send a write (other than to its Lease) now: yes before it
        first leads (a standby's own upkeep) and with election disabled; once it has led, only
        while it leads and its last renewal was sent less than ``renew_deadline`` ago by its own
        clock. That bound is what keeps two leaders apart: nobody takes the Lease before
        ``lease_duration``, later. A process that was paused past it (stop signal, frozen VM)
        resumes with the writes it decided before the pause still queued; this refuses them
        before its renew loop has even run to notice."""
        if not self.enabled or not self._led:
            return True
        if not self._is_leader or self._last_renew is None:
            return False
        return asyncio.get_running_loop().time() < self._last_renew + self.renew_deadline

    @property
    def observed_holder(self) -> str | None:
        return self._observed.holder_identity if self._observed else None

    # ---- main loop -------------------------------------------------------------------------------

    async def run(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        """Wait for leadership, then run ``on_started_leading()`` while leading.

        Returns when that coroutine returns (the Lease is released first). Raises
        :class:`LeaderElectionLost` when leadership is lost (the coroutine has been cancelled),
        re-raises the coroutine's exception (after releasing), and on cancellation cancels the
        coroutine and releases the Lease before re-raising.
        """
        if self._running:
            raise RuntimeError("LeaderElector.run is already running")
        self._running = True
        if not self.enabled:
            self._is_leader = True
            self._state = "disabled"
            try:
                await on_started_leading()
            finally:
                self._is_leader = False
                self._state = "stopped"
                self._running = False
            return

        leading: asyncio.Task[None] | None = None
        try:
            self._state = "standby"
            await self._acquire()
            self._is_leader = True
            self._led = True
            self._state = "leader"
            log.info("leader_elected", identity=self.identity, lease=f"{self.namespace}/{self.name}")
            leading = asyncio.create_task(self._call(on_started_leading), name="leader-elected")
            outcome = await self._renew_while_leading(leading)
            if outcome == "lost":
                await self._stop_leading(leading)
                raise LeaderElectionLost(
                    f"{self.identity} could not renew lease {self.namespace}/{self.name} "
                    f"within {self.renew_deadline}s (holder now: {self.observed_holder or 'none'})"
                )
            # The leading coroutine finished (or failed): give the Lease up, then report.
            self._is_leader = False
            await self._release()
            self._state = "stopped"
            exc = leading.exception() if not leading.cancelled() else None
            if exc is not None:
                raise exc
        except asyncio.CancelledError:
            self._is_leader = False
            if leading is not None and not leading.done():
                await self._stop_leading(leading)
            if self._release_on_cancel:
                await self._release()
            raise
        finally:
            self._is_leader = False
            self._state = "stopped"
            self._running = False

    @staticmethod
    async def _call(fn: Callable[[], Awaitable[None]]) -> None:
        await fn()

    async def _stop_leading(self, leading: asyncio.Task[None]) -> None:
        """Stop acting now: flag first, then cancel the leading task and wait for it (bounded by
        the time left before the Lease can be taken by another)."""
        self._is_leader = False
        self._state = "stopped"
        leading.cancel()
        grace = max(self.lease_duration - self.renew_deadline, 0.1)
        done, _ = await asyncio.wait({leading}, timeout=grace)
        if not done:
            log.error("leading_task_did_not_stop", identity=self.identity, grace_seconds=grace)
        else:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                leading.result()
        log.warning("leader_stopped", identity=self.identity, lease=f"{self.namespace}/{self.name}")

    async def _acquire(self) -> None:
        while True:
            if await self._try_safely():
                return
            delay = self.retry_period * (1.0 + self._jitter * self._rng.random())
            await asyncio.sleep(max(delay, self._throttled))

    async def _renew_while_leading(self, leading: asyncio.Task[None]) -> Literal["lost", "done"]:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.wait({leading}, timeout=self.retry_period)
            if leading.done():
                return "done"
            assert self._last_renew is not None
            deadline = self._last_renew + self.renew_deadline
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return "lost"
                try:
                    async with asyncio.timeout(remaining):
                        ok = await self._try_safely()
                except TimeoutError:
                    return "lost"
                if ok:
                    break
                holder = self.observed_holder
                if holder is not None and holder != self.identity:
                    return "lost"  # someone else holds it: no point waiting for the deadline
                await asyncio.wait({leading}, timeout=min(self.retry_period, max(deadline - loop.time(), 0)))
                if leading.done():
                    return "done"

    async def _try_safely(self) -> bool:
        self._throttled = 0.0
        try:
            return await self._try_acquire_or_renew()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # network errors, 5xx, throttling: retry later
            log.warning("lease_update_failed", identity=self.identity, error=f"{type(e).__name__}: {e}")
            # A candidate honours Retry-After (capped at one lease duration); a leader keeps
            # trying every retry period, since waiting longer would only lose the Lease.
            self._throttled = retry_after(e, 0.0, self.lease_duration) if isinstance(e, TooManyRequests) else 0.0
            return False

    async def _try_acquire_or_renew(self) -> bool:
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        now = self._now()
        duration = math.ceil(self.lease_duration)

        # Fast path: we lead and know the current resourceVersion: renew without reading.
        if self._is_leader and self._observed is not None and self._observed.holder_identity == self.identity:
            renewed = replace(self._observed, renew_time=now, lease_duration_seconds=duration)
            try:
                self._observed = await self.api.replace(self.namespace, self.name, renewed)
                self._last_renew = sent_at
                return True
            except Conflict:
                pass  # someone wrote in between: read and decide below
            sent_at = loop.time()
            now = self._now()

        try:
            current = await self.api.get(self.namespace, self.name)
        except NotFound:
            fresh = LeaseRecord(
                holder_identity=self.identity,
                lease_duration_seconds=duration,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            )
            try:
                self._observed = await self.api.create(self.namespace, self.name, fresh)
            except Conflict:
                return False  # created by another candidate first
            self._last_renew = sent_at
            return True

        self._observe(current)
        holder = current.holder_identity
        if holder and holder != self.identity:
            expires = current.expires_at(self.lease_duration)
            if expires is not None and expires >= now:
                return False  # held and not expired
        if holder == self.identity:
            updated = replace(current, renew_time=now, lease_duration_seconds=duration)
        else:
            updated = replace(
                current,
                holder_identity=self.identity,
                lease_duration_seconds=duration,
                acquire_time=now,
                renew_time=now,
                lease_transitions=current.lease_transitions + 1,
            )
        try:
            self._observed = await self.api.replace(self.namespace, self.name, updated)
        except Conflict:
            return False
        if holder != self.identity:
            log.info("lease_acquired", identity=self.identity, previous=holder, transitions=updated.lease_transitions)
        self._last_renew = sent_at
        return True

    def _observe(self, record: LeaseRecord) -> None:
        previous = self._observed.holder_identity if self._observed else None
        self._observed = record
        if record.holder_identity != previous:
            log.info("lease_holder_observed", identity=self.identity, holder=record.holder_identity)

    async def _release(self) -> None:
        """Clear the holder if it is still us (never clobbers another holder)."""
        rec = self._observed
        if rec is None or rec.holder_identity != self.identity:
            return
        now = self._now()
        released = replace(rec, holder_identity=None, lease_duration_seconds=1, renew_time=now, acquire_time=now)
        try:
            async with asyncio.timeout(self.renew_deadline):
                try:
                    self._observed = await self.api.replace(self.namespace, self.name, released)
                except Conflict:
                    current = await self.api.get(self.namespace, self.name)
                    self._observed = current
                    if current.holder_identity != self.identity:
                        return
                    released = replace(
                        current, holder_identity=None, lease_duration_seconds=1, renew_time=now, acquire_time=now
                    )
                    self._observed = await self.api.replace(self.namespace, self.name, released)
            log.info("lease_released", identity=self.identity, lease=f"{self.namespace}/{self.name}")
        except Exception as e:
            log.warning("lease_release_failed", identity=self.identity, error=f"{type(e).__name__}: {e}")
