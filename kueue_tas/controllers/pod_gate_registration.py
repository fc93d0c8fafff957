"""Whether the pod webhook (``gate.kueue-tas.io``, manifests/base/pod-gate-webhook.yaml) is
registered so that it gates every pod of ours at creation, and in which namespaces.

While it is, the admitter does not write our gate into the suspended Job's or JobSet's
template: the label our check's ``podSetUpdates`` put on each gated PodSet makes the webhook
gate its pods, and the template patch would be one more write per admission that Kueue's Job
reconciler and the kube-controller-manager both react to (issue 15). Only a configuration that
provably covers a namespace counts: our webhook, failing closed, selecting exactly our label,
on pod CREATE, with a namespace selector we can evaluate from the name alone. Anything else
(no configuration, another shape, a read that failed) means the template gate, as before.

The configuration is read when the admitter starts and every ``REFRESH_SECONDS`` after, so a
configuration deleted by hand is noticed within that time (README "Configuration").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.kube.client import request_json
from kueue_tas.kube.errors import ApiError, NotFound
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)

WEBHOOK_NAME: Final = "gate.kueue-tas.io"
MWC_PATH: Final = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
NAME_KEY: Final = "kubernetes.io/metadata.name"
REFRESH_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class NamespaceCover:
    """The namespaces a registered pod webhook gates: all but ``excluded``, or only
    ``included`` when that is set."""

    excluded: frozenset[str] = frozenset()
    included: frozenset[str] | None = None

    def covers(self, namespace: str) -> bool:
        if self.included is not None and namespace not in self.included:
            return False
        return namespace not in self.excluded


def _selects_pod_create(rules: Any) -> bool:
    if not isinstance(rules, list):
        return False
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
        operations, resources = rule.get("operations") or [], rule.get("resources") or []
        if (
            any(g in ("", "*") for g in groups)
            and any(v in ("v1", "*") for v in versions)
            and any(o in ("CREATE", "*") for o in operations)
            and any(r in ("pods", "*") for r in resources)
            and rule.get("scope", "*") in ("*", "Namespaced")
        ):
            return True
    return False


def _namespace_cover(selector: Any) -> NamespaceCover | None:
    """What a ``namespaceSelector`` lets through, when it only looks at the namespace's name
    (the label every namespace carries); None for anything we cannot evaluate here."""
    if selector is None or selector == {}:
        return NamespaceCover()
    if not isinstance(selector, Mapping) or set(selector) - {"matchLabels", "matchExpressions"}:
        return None
    excluded: set[str] = set()
    included: set[str] | None = None
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or set(labels) - {NAME_KEY}:
        return None
    if NAME_KEY in labels:
        included = {str(labels[NAME_KEY])}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return None
    for expr in expressions:
        if not isinstance(expr, Mapping) or expr.get("key") != NAME_KEY:
            return None
        values = expr.get("values") or []
        if not isinstance(values, list):
            return None
        names = {str(v) for v in values}
        if expr.get("operator") == "NotIn":
            excluded |= names
        elif expr.get("operator") == "In":
            included = names if included is None else included & names
        else:
            return None
    return NamespaceCover(frozenset(excluded), None if included is None else frozenset(included))


def registered_cover(configuration: Mapping[str, Any]) -> NamespaceCover | None:
    """The namespaces in which ``configuration`` (a MutatingWebhookConfiguration) makes our
    webhook gate each new pod labelled ``kueue-tas.io/gated=true``; None when it does not."""
    for hook in configuration.get("webhooks") or []:
        if not isinstance(hook, Mapping) or hook.get("name") != WEBHOOK_NAME:
            continue
        # Ignore would let a pod through ungated while no replica answers.
        if hook.get("failurePolicy", "Fail") != "Fail" or hook.get("matchConditions"):
            return None
        if hook.get("objectSelector") != {"matchLabels": {c.GATED_LABEL: c.GATED_LABEL_VALUE}}:
            return None
        if not _selects_pod_create(hook.get("rules")):
            return None
        return _namespace_cover(hook.get("namespaceSelector"))
    return None


class PodGateRegistration:
    """The last read of the webhook configuration ``name``; until the first read succeeds,
    nothing is covered (the template gate is written)."""

    def __init__(self, api: k8s.ApiClient | None, name: str, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.api = api
        self.name = name
        self.refresh_seconds = refresh_seconds
        self._cover: NamespaceCover | None = None

    def covers(self, namespace: str) -> bool:
        return self._cover is not None and self._cover.covers(namespace)

    def set_configuration(self, configuration: Mapping[str, Any] | None) -> None:
        cover = None if configuration is None else registered_cover(configuration)
        if (cover is None) != (self._cover is None):
            log.info("pod_gate_webhook_registered" if cover else "pod_gate_webhook_not_registered", name=self.name)
        self._cover = cover

    async def refresh(self) -> None:
        if self.api is None:
            return
        try:
            configuration = await request_json(self.api, "GET", f"{MWC_PATH}/{self.name}")
        except NotFound:
            self.set_configuration(None)
            return
        except (TimeoutError, ApiError, OSError) as exc:
            # Unknown now: the template gate is always safe.
            log.warning("pod_gate_webhook_read_failed", name=self.name, error=str(exc))
            self.set_configuration(None)
            return
        self.set_configuration(configuration if isinstance(configuration, Mapping) else None)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.refresh_seconds)
