from __future__ import annotations

import io
import json
import logging
import re

import pytest

from kueue_tas.runtime.logging import configure_logging, get_logger


def lines(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_json_lines_have_event_level_utc_timestamp_and_fields() -> None:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    log = get_logger("kueue_tas.test", controller="admitter")
    log.info("workload_admitted", workload="ns/wl", pods=4)
    log.debug("hidden_at_info")
    [rec] = lines(buf)
    assert rec["event"] == "workload_admitted"
    assert rec["level"] == "info"
    assert rec["workload"] == "ns/wl" and rec["pods"] == 4
    assert rec["controller"] == "admitter" and rec["logger"] == "kueue_tas.test"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", str(rec["timestamp"]))
    assert list(rec)[:3] == ["timestamp", "level", "event"]


def test_debug_level_and_exceptions() -> None:
    buf = io.StringIO()
    configure_logging("DEBUG", "json", stream=buf)
    log = get_logger()
    log.debug("visible")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed", key="k")
    recs = lines(buf)
    assert [r["event"] for r in recs] == ["visible", "failed"]
    exc = recs[1]["exception"]
    assert isinstance(exc, list) and exc[0]["exc_type"] == "RuntimeError"
    assert "locals" not in json.dumps(exc)


def test_stdlib_records_use_the_same_format() -> None:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    configure_logging("info", "json", stream=buf)  # idempotent: one handler
    logging.getLogger("aiohttp.client").warning("retrying %s", "x")
    [rec] = lines(buf)
    assert rec["event"] == "retrying x" and rec["level"] == "warning" and rec["logger"] == "aiohttp.client"


def test_console_renderer() -> None:
    buf = io.StringIO()
    configure_logging("info", "console", stream=buf, colors=False)
    get_logger().info("placed", workload="ns/wl")
    out = buf.getvalue()
    assert "placed" in out and "workload=ns/wl" in out and "{" not in out


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("loud")
    with pytest.raises(ValueError, match="unknown log format"):
        configure_logging("info", "xml")  # type: ignore[arg-type]
