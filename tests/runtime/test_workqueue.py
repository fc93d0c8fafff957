from __future__ import annotations

import asyncio

import pytest
from virtual_time import run_virtual, virtual_clock

from kueue_tas.runtime.workqueue import ExponentialBackoff, ShutDown, WorkQueue


def test_dedup_while_queued() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        for k in ["a", "b", "a", "a", "c", "b"]:
            q.add(k)
        assert len(q) == 3
        got = [await q.get() for _ in range(3)]
        assert got == ["a", "b", "c"]

    run_virtual(main())


def test_readd_while_processing_is_processed_again_after_done() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        k = await q.get()
        q.add("a")  # re-added while processing: must not be handed out now
        q.add("a")
        assert len(q) == 0
        getter = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        assert not getter.done()
        q.done(k)
        assert await asyncio.wait_for(getter, 1) == "a"
        q.done("a")
        assert len(q) == 0

    run_virtual(main())


def test_never_two_workers_on_one_key() -> None:
    async def main() -> None:
        q: WorkQueue[int] = WorkQueue()
        active: set[int] = set()
        overlaps = 0
        calls: dict[int, int] = {}

        async def handler(key: int) -> None:
            nonlocal overlaps
            if key in active:
                overlaps += 1
            active.add(key)
            calls[key] = calls.get(key, 0) + 1
            await asyncio.sleep(0.1)
            if calls[key] < 3:
                q.add(key)  # re-add while processing
            active.discard(key)

        runner = asyncio.create_task(q.run(8, handler))
        for key in range(4):
            q.add(key)
            q.add(key)
        await asyncio.sleep(0.01)
        for key in range(4):
            q.add(key)
        await q.wait_idle()
        q.shut_down()
        await runner
        assert overlaps == 0
        assert calls == {0: 3, 1: 3, 2: 3, 3: 3}

    run_virtual(main())


def test_add_after_uses_earliest_time() -> None:
    async def main() -> None:
        clock = virtual_clock()
        q: WorkQueue[str] = WorkQueue()
        q.add_after("a", 10)
        q.add_after("a", 3)  # earlier wins
        q.add_after("a", 20)  # later ignored
        q.add_after("b", 5)
        assert q.num_waiting() == 2
        assert await q.get() == "a"
        assert clock.now == pytest.approx(3)
        assert await q.get() == "b"
        assert clock.now == pytest.approx(5)
        q.done("a")
        q.done("b")
        await asyncio.sleep(30)
        assert len(q) == 0  # the superseded 10 s and 20 s entries did not fire
        q.add_after("c", 0)
        assert len(q) == 1

    run_virtual(main())


def test_rate_limited_backoff_and_forget() -> None:
    async def main() -> None:
        clock = virtual_clock()
        q: WorkQueue[str] = WorkQueue(rate_limiter=ExponentialBackoff(base=1, maximum=5))
        times = []
        for _ in range(5):
            start = clock.now
            q.add_rate_limited("a")
            k = await q.get()
            times.append(clock.now - start)
            q.done(k)
        assert times == pytest.approx([1, 2, 4, 5, 5])
        assert q.num_requeues("a") == 5
        q.forget("a")
        assert q.num_requeues("a") == 0

    run_virtual(main())


def test_backoff_validates() -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(base=0)
    with pytest.raises(ValueError):
        ExponentialBackoff(base=2, maximum=1)
    b: ExponentialBackoff[str] = ExponentialBackoff(base=1, maximum=10)
    for _ in range(100):
        assert b.when("x") <= 10


def test_run_requeues_failures_with_backoff_and_honours_requeue_after() -> None:
    async def main() -> None:
        clock = virtual_clock()
        q: WorkQueue[str] = WorkQueue(rate_limiter=ExponentialBackoff(base=1, maximum=100))
        seen: list[tuple[str, float]] = []

        async def handler(key: str) -> float | None:
            seen.append((key, clock.now))
            if key == "fail" and len([s for s in seen if s[0] == "fail"]) < 3:
                raise RuntimeError("boom")
            if key == "later" and len([s for s in seen if s[0] == "later"]) == 1:
                return 7.0
            return None

        runner = asyncio.create_task(q.run(2, handler))
        q.add("fail")
        q.add("later")
        await asyncio.sleep(50)
        q.shut_down()
        await runner
        fail_times = [t for k, t in seen if k == "fail"]
        later_times = [t for k, t in seen if k == "later"]
        assert fail_times == pytest.approx([0, 1, 3])  # 1 s then 2 s backoff
        assert later_times == pytest.approx([0, 7])
        assert q.num_requeues("fail") == 0  # forgotten after success

    run_virtual(main())


def test_shutdown_wakes_getters_and_ignores_adds() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        getter = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        q.add_after("x", 5)
        q.shut_down()
        with pytest.raises(ShutDown):
            await getter
        q.add("y")
        q.add_after("z", 1)
        assert len(q) == 0 and q.num_waiting() == 0
        with pytest.raises(ShutDown):
            await q.get()

    run_virtual(main())


def test_shutdown_with_drain_processes_queued_keys() -> None:
    async def main() -> None:
        q: WorkQueue[int] = WorkQueue()
        done: list[int] = []

        async def handler(key: int) -> None:
            await asyncio.sleep(1)
            done.append(key)

        for i in range(5):
            q.add(i)
        runner = asyncio.create_task(q.run(1, handler))
        await asyncio.sleep(0.5)
        q.shut_down(drain=True)
        await runner
        assert done == [0, 1, 2, 3, 4]

    run_virtual(main())


def test_shutdown_without_drain_drops_queued_keys() -> None:
    async def main() -> None:
        q: WorkQueue[int] = WorkQueue()
        done: list[int] = []

        async def handler(key: int) -> None:
            await asyncio.sleep(1)
            done.append(key)

        for i in range(5):
            q.add(i)
        runner = asyncio.create_task(q.run(1, handler))
        await asyncio.sleep(0.5)
        q.shut_down()
        await runner
        assert done == [0]  # the in-flight key finishes, the rest is dropped

    run_virtual(main())


def test_cancelling_run_cancels_workers() -> None:
    async def main() -> None:
        q: WorkQueue[int] = WorkQueue()
        cancelled = asyncio.Event()

        async def handler(key: int) -> None:
            try:
                await asyncio.sleep(1000)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        q.add(1)
        runner = asyncio.create_task(q.run(2, handler))
        await asyncio.sleep(1)
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        assert cancelled.is_set()
        assert q.shutting_down

    run_virtual(main())


def test_cancelled_getter_passes_wakeup_on() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        g1 = asyncio.create_task(q.get())
        g2 = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        q.add("a")  # wakes g1
        g1.cancel()  # ... which is cancelled before it runs
        assert await asyncio.wait_for(g2, 1) == "a"

    run_virtual(main())


def test_run_rejects_zero_workers() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()

        async def handler(key: str) -> None:
            return None

        with pytest.raises(ValueError):
            await q.run(0, handler)

    run_virtual(main())
