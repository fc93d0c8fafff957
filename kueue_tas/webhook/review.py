"""One AdmissionReview (admission.k8s.io/v1) in, its answer out (pure).

The request names the object, its old version on UPDATE and the operation; the answer allows
or denies with one message (every problem, ``; ``-joined) and carries the warnings, which
``kubectl`` prints as ``Warning: ...`` lines.

Anyone on the pod network can reach the webhook port, so a body is taken for what it claims only
after checks: JSON of bounded depth (``decode_review``), an AdmissionReview (``parse_review``),
of a kind the endpoint serves (``Endpoint.check``). Each failure is a ``ReviewError`` whose
one-line message the server answers with 400.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
import pydantic

from kueue_tas.api.kinds import KubeObject, parse_object
from kueue_tas.capacity.creation_checks import TopologyView, Verdict, review_create, review_update
from kueue_tas.topology.features import FeatureGates

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
# The apiserver keeps at most this much of a denial message; ours stay far below it, but a
# 100 kB annotation value quoted back must not be.
MAX_MESSAGE: Final = 4000
MAX_WARNINGS: Final = 20
# orjson's own depth limit: deeper JSON is refused while it is read, before any recursion of ours.
MAX_DEPTH: Final = 1024
# How much of a value we did not expect is quoted back in a 400 (a kind may be 400 kB long).
MAX_QUOTED: Final = 80


class ReviewError(ValueError):
    """Not an AdmissionReview we can answer (the HTTP answer is 400 with this message)."""


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    uid: str
    kind: str
    operation: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    group: str = ""
    # The resource ``(group, name)`` when the request names one (the apiserver always does).
    resource: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Objects:
    """A request's object and, on UPDATE, its old version, as models."""

    obj: KubeObject
    old: KubeObject | None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The kinds a webhook path is configured for: ``(group, kind) -> resource``, as its rules
    in the manifests name them."""

    path: str
    kinds: Mapping[tuple[str, str], str]

    def check(self, request: ReviewRequest) -> None:
        """``ReviewError`` unless ``request`` is of a kind (and resource) this endpoint serves."""
        resource = self.kinds.get((request.group, request.kind))
        if resource is None:
            served = ", ".join(_qualified(g, k) for g, k in self.kinds)
            raise ReviewError(
                f"request.kind: {_quoted(_qualified(request.group, request.kind))} is not a kind "
                f"{self.path} serves ({served})"
            )
        if request.resource is not None and request.resource != (request.group, resource):
            raise ReviewError(
                f"request.resource: {_quoted(_qualified(*request.resource))} is not the resource of "
                f"{_qualified(request.group, request.kind)} ({resource})"
            )


def _qualified(group: str, name: str) -> str:
    return f"{group}/{name}" if group else name


def _quoted(value: str) -> str:
    """``value`` as a JSON string (one line whatever it holds), cut to ``MAX_QUOTED``."""
    shown = json.dumps(value[:MAX_QUOTED])
    return shown if len(value) <= MAX_QUOTED else shown[:-1] + '..."'


class _Request(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore", populate_by_name=True)
    uid: str
    kind: dict[str, str] = pydantic.Field(default_factory=dict)
    resource: dict[str, str] | None = None
    operation: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = pydantic.Field(default=None, alias="oldObject")


class _Review(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore", populate_by_name=True)
    api_version: str = pydantic.Field(alias="apiVersion")
    kind: str
    request: _Request


def decode_review(raw: bytes) -> ReviewRequest:
    """The request of an AdmissionReview body as it came over the wire."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise ReviewError(f"request body: JSON nested more than {MAX_DEPTH} levels deep") from None
        raise ReviewError(f"request body: not JSON: {exc}") from None
    return parse_review(body)


def parse_review(body: Any) -> ReviewRequest:
    """The request of an AdmissionReview body (already JSON-decoded)."""
    try:
        review = _Review.model_validate(body)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        # A key of the body can be part of the location: quoted short, like any value we echo.
        where = ".".join(str(p) if isinstance(p, int) or p.isidentifier() else _quoted(p) for p in err["loc"])
        raise ReviewError(f"not an AdmissionReview: {where}: {err['msg']}") from None
    if review.api_version != REVIEW_API_VERSION or review.kind != "AdmissionReview":
        raise ReviewError(
            f"expected {REVIEW_API_VERSION} AdmissionReview, got {_quoted(review.api_version)} {_quoted(review.kind)}"
        )
    r = review.request
    resource = (r.resource.get("group", ""), r.resource.get("resource", "")) if r.resource is not None else None
    return ReviewRequest(
        r.uid, r.kind.get("kind", ""), r.operation, r.object or {}, r.old_object, r.kind.get("group", ""), resource
    )


def judged_objects(request: ReviewRequest) -> Objects | None:
    """The objects of a request we judge; None for operations and kinds we do not, and for an
    object that does not parse: the API server's own validation is the judge of shape."""
    if request.operation not in ("CREATE", "UPDATE"):
        return None
    try:
        obj = parse_object(request.obj)
        old = parse_object(request.old) if request.old is not None else None
    except pydantic.ValidationError:
        return None
    return None if obj is None else Objects(obj, old)


def judge(
    request: ReviewRequest, objects: Objects, topologies: Sequence[TopologyView], prefix: str, gates: FeatureGates
) -> Verdict:
    """The verdict on ``request`` (its ``objects``), against the Topologies its queue leads to."""
    if request.operation == "UPDATE" and objects.old is not None:
        return review_update(objects.old, objects.obj, topologies, prefix, gates)
    return review_create(objects.obj, topologies, prefix, gates)


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
