"""``kueue-tas plan``: one PodSet's request, and the checks that need the whole workload or the
Topology, each failure a ``PlanInputError`` naming the object, the field and the problem.

The request comes from the pod template's annotations, or from the Workload's
``spec.podSets[].topologyRequest`` when the template has none of ours; messages name the
one that was used.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

import pydantic

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import JobSet
from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.api.podsets import PodSetSpec
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.shapes import template_shape_error
from kueue_tas.api.workload import MAX_PODSETS, PodSetTopologyRequestModel, Workload, podset_count_fault
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.level_names import LevelNames
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.requests.groups import GroupMember, group_errors
from kueue_tas.topology.requests.inputs import PodSpecError, podset_request
from kueue_tas.topology.requests.levels import level_problem
from kueue_tas.topology.requests.request import TopologyRequestError, annotation_keys
from kueue_tas.topology.requests.request_field import TopologyFieldError, uses_field


class PlanInputError(ValueError):
    """Invalid input; the message is one line naming the object, the field and the problem."""


def describe(obj: KubeObject) -> str:
    ns = obj.metadata.namespace
    return f"{obj.kind}/{ns + '/' if ns else ''}{obj.metadata.name}"


def template_path(obj: KubeObject, index: int) -> str:
    if isinstance(obj, Workload):
        return f"spec.podSets[{index}].template"
    if isinstance(obj, JobSet):
        return f"spec.replicatedJobs[{index}].template.spec.template"
    return "spec.template"


def _field_path(index: int) -> str:
    return f"spec.podSets[{index}]"


def podset_request_for(
    obj: KubeObject,
    ps: PodSetSpec,
    index: int,
    field: PodSetTopologyRequestModel | None,
    prefix: str,
    gates: FeatureGates,
    *,
    implied: bool,
) -> PodSetRequest:
    context = describe(obj)
    path = template_path(obj, index)
    problem = template_shape_error(ps.template, path)
    if problem is not None:
        raise PlanInputError(f"{context}: {problem}")
    try:
        return podset_request(
            ps.name, ps.count, ps.template, prefix=prefix, implied=implied, gates=gates, topology_field=field
        )
    except (TopologyRequestError, QuantityError, pydantic.ValidationError, ValueError, TypeError) as exc:
        raise request_input_error(obj, index, exc) from exc


def request_input_error(obj: KubeObject, index: int, exc: Exception) -> PlanInputError:
    """The input error for a PodSet request that reading raised ``exc`` for: the field's path."""
    context = describe(obj)
    path = template_path(obj, index)
    if isinstance(exc, TopologyFieldError):
        return PlanInputError(f"{context}: {_field_path(index)}.{'; '.join(exc.errors)}")
    if isinstance(exc, PodSpecError):
        return PlanInputError(f"{context}: {path}.{'; '.join(exc.errors)}")
    if isinstance(exc, TopologyRequestError):
        return PlanInputError(f"{context}: {path}.metadata.annotations: {'; '.join(exc.errors)}")
    if isinstance(exc, pydantic.ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        return PlanInputError(f"{context}: {path}.spec.tolerations: {loc}: {err['msg']}")
    return PlanInputError(f"{context}: {path}.spec.containers[].resources: {exc}")


def check_workload_counts(wl: Workload) -> None:
    """What Kueue's Workload schema allows: 1 to 18 PodSets, counts 0 to int32 (the rule is
    ``api.workload.podset_count_fault``; a Workload with no PodSet has nothing to plan)."""
    fault = podset_count_fault(wl)
    if fault is None or fault.kind == "empty":
        return
    if fault.kind == "too_many":
        raise PlanInputError(f"{describe(wl)}: spec.podSets: has {fault.total} entries, at most {MAX_PODSETS} allowed")
    where = f"status.admission.podSetAssignments[{fault.index}]" if fault.admitted else f"spec.podSets[{fault.index}]"
    bound = "at least 0" if fault.count < 0 else f"at most {INT32_MAX}"
    raise PlanInputError(f"{describe(wl)}: {where}.count: must be {bound}, got {fault.count}")


def check_jobset_counts(obj: JobSet, podsets: Sequence[PodSetSpec]) -> None:
    """A JobSet becomes one Workload: at most its PodSet limit, each count an int32."""
    if len(podsets) > MAX_PODSETS:
        raise PlanInputError(
            f"{describe(obj)}: spec.replicatedJobs: has {len(podsets)} entries, "
            f"a Workload holds at most {MAX_PODSETS} PodSets"
        )
    for i, ps in enumerate(podsets):
        if ps.count > INT32_MAX:
            raise PlanInputError(
                f"{describe(obj)}: spec.replicatedJobs[{i}]: replicas x pods per Job is {ps.count}, "
                f"more than a PodSet counts ({INT32_MAX})"
            )


# Unknown keys named one by one, each with its "did you mean" (difflib, ~0.4 ms a key); the rest
# are counted in one line. A review's answer carries 20 warnings at most, and a body from anyone
# on the pod network may hold hundreds of thousands of such keys (issue 30 review).
MAX_UNKNOWN_KEYS = 20


def unknown_keys(obj: KubeObject, index: int, annotations: Mapping[str, str], prefix: str) -> list[str]:
    """Warnings for template annotations under our prefix that we do not read (a typo drops the request)."""
    known = [prefix + suffix for suffix in c.TOPOLOGY_ANNOTATION_SUFFIXES]
    warnings = []
    unknown = [key for key in annotations if key.startswith(prefix) and key not in known]
    for key in unknown[:MAX_UNKNOWN_KEYS]:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        where = f"{describe(obj)}: {template_path(obj, index)}.metadata.annotations[{key}]"
        warnings.append(f"{where}: not a key kueue-tas reads, ignored{hint}")
    if len(unknown) > MAX_UNKNOWN_KEYS:
        warnings.append(
            f"{describe(obj)}: {template_path(obj, index)}.metadata.annotations: "
            f"{len(unknown) - MAX_UNKNOWN_KEYS} more keys under {prefix} that kueue-tas does not read, ignored"
        )
    return warnings


def _from_field(obj: KubeObject, index: int, field: PodSetTopologyRequestModel | None, prefix: str) -> bool:
    if field is None or not isinstance(obj, Workload):
        return False
    annotations = (obj.spec.pod_sets[index].template.get("metadata") or {}).get("annotations") or {}
    return uses_field(annotations, field, prefix)


def levels_problem(
    obj: KubeObject,
    index: int,
    request: PodSetRequest,
    levels: Sequence[str],
    topology_name: str,
    names: LevelNames,
    field: PodSetTopologyRequestModel | None,
    prefix: str,
) -> str | None:
    """The input error line for a level the Topology with ``levels`` lacks, or levels out of
    order (``plan`` and the admission webhook, which has no snapshot: no flavor is chosen at
    creation), or None."""
    problem = level_problem(levels, request.topology)
    if problem is None:
        return None
    from_field = _from_field(obj, index, field, prefix)

    def locate(suffix: str, field_name: str) -> str:
        if from_field:
            return f"{_field_path(index)}.topologyRequest.{field_name}"
        return f"{template_path(obj, index)}.metadata.annotations[{prefix}{suffix}]"

    where = locate(problem.suffix, problem.field)
    if problem.unknown is not None:
        # The admitter's words (controllers/decide.py), so a user meets one message wherever it is found.
        detail = (
            f'unknown topology level "{problem.unknown}"; '
            f'Topology "{topology_name}" has levels {", ".join(levels)}{names.offered()}'
        )
    else:
        detail = problem.text(locate)
    return f"{describe(obj)}: {where}: {detail}"


def check_groups(
    obj: KubeObject,
    members: Sequence[tuple[int, PodSetRequest]],
    fields: Sequence[PodSetTopologyRequestModel | None],
    prefix: str,
) -> None:
    """PodSet groups must be leader + workers pairs (Kueue's webhook rules; ``groups``)."""
    group_key = annotation_keys(prefix).group
    described = []
    for (index, request), field in zip(members, fields, strict=True):
        from_field = _from_field(obj, index, field, prefix)
        if from_field:
            group_field = f"{_field_path(index)}.topologyRequest.podSetGroupName"
            where = f"{_field_path(index)}.topologyRequest"
        else:
            where = f"{template_path(obj, index)}.metadata.annotations"
            group_field = f"{where}[{group_key}]"
        described.append(GroupMember(request.name, request.count, request.topology, group_field, where, from_field))
    errors = group_errors(described, prefix)
    if errors:
        raise PlanInputError(f"{describe(obj)}: " + "; ".join(e.message for e in errors))
