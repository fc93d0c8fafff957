"""One AdmissionReview (admission.k8s.io/v1) in, its answer out (pure).

The request names the object, its old version on UPDATE and the operation; the answer allows
or denies with one message (every problem, ``; ``-joined) and carries the warnings, which
``kubectl`` prints as ``Warning: ...`` lines.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pydantic

from kueue_tas.api.kinds import KubeObject, parse_object
from kueue_tas.capacity.creation_checks import TopologyView, Verdict, review_create, review_update
from kueue_tas.topology.features import FeatureGates

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
# The apiserver keeps at most this much of a denial message; ours stay far below it, but a
# 100 kB annotation value quoted back must not be.
MAX_MESSAGE: Final = 4000
MAX_WARNINGS: Final = 20


class ReviewError(ValueError):
    """Not an AdmissionReview we can answer (the HTTP answer is 400 with this message)."""


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    uid: str
    kind: str
    operation: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


class _Request(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore", populate_by_name=True)
    uid: str
    kind: dict[str, str] = pydantic.Field(default_factory=dict)
    operation: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = pydantic.Field(default=None, alias="oldObject")


class _Review(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore", populate_by_name=True)
    api_version: str = pydantic.Field(alias="apiVersion")
    kind: str
    request: _Request


def parse_review(body: Any) -> ReviewRequest:
    """The request of an AdmissionReview body (already JSON-decoded)."""
    try:
        review = _Review.model_validate(body)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise ReviewError(f"not an AdmissionReview: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from exc
    if review.api_version != REVIEW_API_VERSION or review.kind != "AdmissionReview":
        raise ReviewError(f"expected {REVIEW_API_VERSION} AdmissionReview, got {review.api_version} {review.kind}")
    r = review.request
    return ReviewRequest(r.uid, r.kind.get("kind", ""), r.operation, r.object or {}, r.old_object)


def judge(
    request: ReviewRequest,
    topologies_for: Callable[[KubeObject], Sequence[TopologyView]],
    prefix: str,
    gates: FeatureGates,
) -> Verdict:
    """The verdict on ``request``; kinds and operations we do not judge are allowed. An object
    that does not parse is allowed too: the API server's own validation is the judge of shape."""
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict()
    try:
        obj = parse_object(request.obj)
        old = parse_object(request.old) if request.old is not None else None
    except pydantic.ValidationError:
        return Verdict()
    if obj is None:
        return Verdict()
    if request.operation == "UPDATE" and old is not None:
        return review_update(old, obj, topologies_for(obj), prefix, gates)
    return review_create(obj, topologies_for(obj), prefix, gates)


def answer(uid: str, verdict: Verdict, patch: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The AdmissionReview response for ``verdict``; ``patch``: JSON patch operations a mutating
    webhook applies to an allowed object."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if patch and verdict.allowed:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    if not verdict.allowed:
        message = "; ".join(verdict.problems)
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        response["status"] = {"code": 403, "reason": "Forbidden", "message": message}
    if verdict.warnings:
        response["warnings"] = verdict.warnings[:MAX_WARNINGS]
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}
