from __future__ import annotations

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.health import HealthServer, leader_election_check
from kueue_tas.runtime.listen import BindError
from kueue_tas.runtime.metrics import Metrics


class FakeElector:
    state = "standby"


async def client_for(server: HealthServer) -> TestClient[aiohttp.web.Request, aiohttp.web.Application]:
    c = TestClient(TestServer(server.make_app()))
    await c.start_server()
    return c


async def test_healthz_always_ok() -> None:
    c = await client_for(HealthServer())
    try:
        r = await c.get("/healthz")
        assert r.status == 200 and (await r.text()).strip() == "ok"
    finally:
        await c.close()


async def test_readyz_follows_checks() -> None:
    hs = HealthServer()
    synced = {"v": False}
    elector = FakeElector()
    hs.add_readiness_check("informers", lambda: (synced["v"], "pods, nodes"))
    hs.add_readiness_check("leader-election", leader_election_check(elector))
    c = await client_for(hs)
    try:
        r = await c.get("/readyz")
        text = await r.text()
        assert r.status == 503
        assert "[-]informers failed: pods, nodes" in text and "[+]leader-election ok: standby" in text
        synced["v"] = True
        r = await c.get("/readyz")
        assert r.status == 200 and (await r.text()).strip() == "ok"  # a standby is ready
        r = await c.get("/readyz?verbose")
        assert "[+]informers ok" in await r.text()
        elector.state = "stopped"
        assert (await c.get("/readyz")).status == 503
        assert not hs.ready()
    finally:
        await c.close()


async def test_failing_check_that_raises() -> None:
    hs = HealthServer()

    def broken() -> bool:
        raise RuntimeError("nope")

    hs.add_readiness_check("broken", broken)
    c = await client_for(hs)
    try:
        r = await c.get("/readyz")
        assert r.status == 503 and "check raised RuntimeError: nope" in await r.text()
    finally:
        await c.close()


async def test_metrics_endpoint() -> None:
    m = Metrics()
    m.record_admission("rejected")
    c = await client_for(HealthServer(metrics=m))
    try:
        r = await c.get("/metrics")
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        assert 'kueue_tas_admissions_total{outcome="rejected"} 1.0' in await r.text()
    finally:
        await c.close()


async def test_start_binds_both_addresses_and_stops() -> None:
    local_dev = {"metrics_secure": False, "metrics_auth": False}  # the only way to share the probes' socket
    hs = HealthServer(
        Settings(leader_election=False, health_bind="127.0.0.1:0", metrics_bind="127.0.0.1:0", **local_dev)
    )
    await hs.start()
    try:
        addrs = hs.addresses
        assert len(addrs) == 1  # equal binds share one socket
        host, port = addrs[0]
        async with aiohttp.ClientSession() as s:
            for path in ("/healthz", "/metrics"):
                async with s.get(f"http://{host}:{port}{path}") as r:
                    assert r.status == 200, path
    finally:
        await hs.stop()
    assert hs.addresses == []


async def test_metrics_bind_can_be_disabled() -> None:
    hs = HealthServer(Settings(leader_election=False, health_bind="127.0.0.1:0", metrics_bind="0"))
    await hs.start()
    try:
        assert len(hs.addresses) == 1
    finally:
        await hs.stop()


async def test_a_taken_port_is_one_error_naming_the_setting_and_address() -> None:
    """Chaos seed 824: a replica whose health port another process had just taken died with a
    traceback; the error now names the setting, the address and why."""
    first = HealthServer(Settings(leader_election=False, health_bind="127.0.0.1:0", metrics_bind="0"))
    await first.start()
    try:
        (_, port) = first.addresses[0]
        second = HealthServer(
            Settings(leader_election=False, health_bind="127.0.0.1:0", metrics_bind=f"127.0.0.1:{port}")
        )
        with pytest.raises(BindError) as err:
            await second.start()
        assert str(err.value).startswith(f"metrics_bind '127.0.0.1:{port}': cannot listen on 127.0.0.1:{port}: ")
        assert "in use" in str(err.value).lower() and "\n" not in str(err.value)
        assert second.addresses == []
    finally:
        await first.stop()
