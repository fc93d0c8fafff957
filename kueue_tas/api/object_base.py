"""The base of every object model kueue-tas reads: ``KubeModel``, ``ObjectMeta``, ``TypedObject``,
conditions, taints and tolerations.

Only the fields we use are modelled; everything else is ignored on input
(``extra="ignore"``). Fields are named in snake_case and read from the
camelCase of the API (``populate_by_name`` also allows snake_case). Pod
templates stay raw dicts: we hand them to the request/annotation parsers and
write them back, and they must round-trip unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

INT32_MAX = 2**31 - 1
# Counts the API server keeps as int32 with a minimum of 0 (pods, replicas, parallelism); beyond
# them no object can exist, and a negative count would "fit" anywhere.
NonNegativeInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 time as Kubernetes writes it (``Z`` or an offset; UTC when neither), aware;
    ``ValueError`` for anything else."""
    at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def resource_version_older_or_same(version: str | None, than: str | None) -> bool:
    """``version`` is no newer than ``than`` (two resourceVersions of one object). Compared as
    Kubernetes allows since v1.35 (KEP-5504, client-go's ``CompareResourceVersion``): positive
    integers without leading zeros; anything else cannot be ordered, and gives False."""

    def order(value: str | None) -> int | None:
        if not value or not value.isdigit() or value.startswith("0") or not value.isascii():
            return None
        return int(value)

    a, b = order(version), order(than)
    return a is not None and b is not None and a <= b


class KubeModel(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=False,
    )


class OwnerReference(KubeModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(KubeModel):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None

    @field_validator("creation_timestamp", "deletion_timestamp", mode="before")
    @classmethod
    def _rfc3339(cls, value: Any) -> Any:
        """A YAML dump's unquoted time is read as a datetime: back to the API server's form."""
        if isinstance(value, datetime) and value.tzinfo is not None:
            return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return value

    def controller_owner(self) -> OwnerReference | None:
        """The owner reference marked ``controller: true``, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None


class Condition(KubeModel):
    """A ``metav1.Condition`` (Kueue objects) or a core-v1 NodeCondition; both have type/status."""

    type: str
    status: str = "Unknown"
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The first condition of ``type_`` (Kubernetes helpers also return the first one)."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def condition_is_true(conditions: list[Condition], type_: str) -> bool:
    cond = find_condition(conditions, type_)
    return cond is not None and cond.status == "True"


class TaintModel(KubeModel):
    key: str = ""
    value: str = ""
    effect: str = ""


class TolerationModel(KubeModel):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class TypedObject(KubeModel):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
