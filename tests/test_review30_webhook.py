"""Review of issue 30 (adversarial, in-process): what a request to the webhook port can still
cost after the fixes. Each test here failed on a6e628f before its fix."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from builders import job
from builders import topology as topology_obj
from test_webhook_server import HOSTS, FakeCaches, pod_review, review, write_cert
from test_webhook_server import client_context as new_client_context

from kueue_tas.api import constants as c
from kueue_tas.api.kinds import parse_object
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.capacity.creation_checks import TopologyView, review_create
from kueue_tas.runtime.certs import ServingCert, issue
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES
from kueue_tas.webhook import intake
from kueue_tas.webhook.cert_keeper import FileCerts
from kueue_tas.webhook.intake import ByteBudget
from kueue_tas.webhook.server import POD_GATE_PATH, WebhookServer

PREFIX = "kueue-tas.io/"


def misspelt_job(keys: int) -> dict[str, Any]:
    return job("train", 1, {f"{PREFIX}podset-requried-topology-{i}": "x" for i in range(keys)})


def test_thousands_of_misspelt_keys_cost_milliseconds_not_a_judge_for_seconds() -> None:
    """Each unknown key under our prefix got a difflib "did you mean" (about 0.4 ms each): 20,000
    keys (an 1 MiB body) held a judge thread for ~9 s, and the two judges serve the pod gate
    (failurePolicy Fail, 5 s timeout) too. The answer carries 20 warnings at most, so no more
    hints are worth computing."""
    obj = parse_object(misspelt_job(20_000))
    assert obj is not None
    started = time.perf_counter()
    verdict = review_create(obj, [], PREFIX, DEFAULT_GATES)
    took = time.perf_counter() - started
    assert took < 1.0, took
    assert verdict.allowed
    assert "did you mean kueue-tas.io/podset-required-topology?" in verdict.warnings[0]
    assert len(verdict.warnings) <= 21
    assert "19980 more" in verdict.warnings[-1]
