"""Controller settings: defaults < YAML config file < ``KUEUE_TAS_*`` environment < explicit keywords.

``Settings()`` reads the environment (prefix ``KUEUE_TAS_``, case-insensitive, e.g.
``KUEUE_TAS_PATCH_CONCURRENCY=64``); ``Settings.from_file(path)`` also reads a YAML mapping of
the same field names (snake_case; ``-`` is accepted for ``_``, and camelCase such as
``featureGates`` too). Anything invalid raises :class:`ConfigError` (a ``ValueError``) whose
message names every bad field and why.

``feature_gates`` are Kueue's TAS gates: a mapping ``{Name: bool}`` in the file,
``KUEUE_TAS_FEATURE_GATES="A=true,B=false"`` in the environment. Only the shape is checked
here (runtime does not import the engine); the names are checked against
``kueue_tas.topology.features`` by ``kueue-tas run`` before anything starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from kueue_tas.api.constants import CONTROLLER_NAME, DEFAULT_ANNOTATION_PREFIX, SCHEDULING_GATE
from kueue_tas.api.pod_shape import PodShape, PodShapeError, parse_pod_shape

NodeFailurePolicy = Literal["Wait", "Requeue"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["json", "console"]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


class ConfigError(ValueError):
    """Invalid configuration: the message lists each offending setting."""


def parse_bind(value: str) -> tuple[str | None, int] | None:
    """``":8080"`` -> ``(None, 8080)`` (all interfaces), ``"127.0.0.1:0"``, ``"[::1]:9"``; ``"0"`` -> None (off)."""
    text = value.strip()
    if text in ("0", ""):
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {value!r} must look like 'host:port' or ':port' (or '0' to disable)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"bind address {value!r}: port must be a number 0..65535")
    return (host or None, int(port_text))


def _is_qualified_name(value: str) -> bool:
    """Kubernetes qualified name: optional DNS-subdomain prefix, '/', name of <= 63 characters."""
    prefix, sep, name = value.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


# Values read by Settings.from_file; a context variable so that concurrent loads do not mix.
_FILE_VALUES: ContextVar[Mapping[str, Any] | None] = ContextVar("kueue_tas_settings_file", default=None)


class _FileSource(PydanticBaseSettingsSource):
    """The YAML file given to ``Settings.from_file`` (lower priority than the environment)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        values = _FILE_VALUES.get() or {}
        return values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_VALUES.get() or {})


class Settings(BaseSettings):
    """Everything the controller can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="KUEUE_TAS_",
        case_sensitive=False,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    # names on the wire
    annotation_prefix: str = DEFAULT_ANNOTATION_PREFIX
    scheduling_gate: str = SCHEDULING_GATE
    controller_name: str = CONTROLLER_NAME

    # behaviour
    ungate_batch_period_seconds: float = Field(default=1.0, ge=0, le=300)
    retry_backoff_base_seconds: float = Field(default=10, gt=0)
    retry_backoff_max_seconds: float = Field(default=600, gt=0)
    patch_concurrency: int = Field(default=32, ge=1, le=1024)
    # Workloads whose admission writes run at once (decisions themselves are one at a time).
    # Safe above 1 because the pod webhook gates our pods at creation: a fast re-admission can
    # meet a late Kueue stop that restores the Job template without our gate (chaos seeds 1209,
    # 1213), and the template alone no longer decides whether a pod is gated.
    admission_workers: int = Field(default=16, ge=1, le=256)
    # Client-side limit on the requests the controller starts (client-go's QPS and Burst, as
    # Kueue ships its own clientConnection): 0 turns it off.
    api_qps: float = Field(default=300, ge=0)
    api_burst: int = Field(default=500, ge=1)
    # How long a pod patch whose outcome is unknown (timeout, reset, 5xx) holds its slot before
    # the pod is released again. Longer than the apiserver's own request timeout (60 s), so a
    # patch still being processed there is seen before we give up on it; much shorter than
    # client-go's 5 min because here a real pod waits gated while it runs.
    ungate_expectation_timeout_seconds: float = Field(default=90, gt=0, le=3600)
    # Failed nodes under admitted workloads (``controllers/repair/reconciler``): a node NotReady or
    # Unknown this long counts as failed (Kueue's NodeFailureDelay); when no replacement fits,
    # ``Wait`` keeps trying as capacity changes, ``Requeue`` sets our entry to Retry after
    # ``node_failure_requeue_after_seconds`` so Kueue evicts and requeues the workload.
    node_failure_grace_seconds: float = Field(default=30, ge=0, le=86400)
    node_failure_policy: NodeFailurePolicy = "Wait"
    node_failure_requeue_after_seconds: float = Field(default=300, ge=0, le=86400)
    # A bound pod of an admitted workload that its current assignment has no slot for (a node
    # repair moved its node's slots away) is deleted once it has been so this long: long enough
    # for the informer to show an assignment update that would give it a slot after all.
    stray_pod_grace_seconds: float = Field(default=5, ge=0, le=3600)
    # Capacity held for DaemonSet pods not yet bound (``capacity/daemonsets``): only DaemonSets in
    # these namespaces or whose pods have one of these priority classes (anyone with `edit` can
    # create a DaemonSet elsewhere), only pods that fit on the empty node, and for at most this
    # long after the DaemonSet or the Node was created. Environment: comma-separated lists.
    daemonset_reservation_namespaces: Annotated[tuple[str, ...], NoDecode] = ("kube-system", "gpu-operator")
    # None by default: any namespace may use the system priority classes unless a ResourceQuota
    # scoped to PriorityClass forbids it, so a tenant's DaemonSet could name one (issue 30 review).
    daemonset_reservation_priority_classes: Annotated[tuple[str, ...], NoDecode] = ()
    daemonset_reservation_seconds: float = Field(default=300, ge=0, le=86400)
    # Topology-driven preemption (``controllers/preemption``; a ClusterQueue opts in with the
    # annotation ``<prefix>topology-preemption``): at most this many victims per preemption and
    # preemptions per minute (the whole controller); the cleared domain is held for its
    # preemptor this long at most; a victim's cost is this resource it holds times its run time.
    preemption_max_victims: int = Field(default=8, ge=1, le=64)
    preemption_per_minute: int = Field(default=6, ge=0, le=600)
    preemption_hold_seconds: float = Field(default=300, gt=0, le=86400)
    preemption_cost_resource: str = "nvidia.com/gpu"
    # A workload may preempt only once it has waited this long for a domain (0: at once). With
    # reservations on, a reserved workload that still waits escalates to preemption after this.
    preemption_after_seconds: float = Field(default=0, ge=0, le=7 * 86400)
    # Reservations (``controllers/reservation``; off while ``reservation_after_seconds`` is 0): a
    # workload that has waited this long for a domain, while enough is free in total, gets one
    # domain held for it (at most ``reservations_per_flavor`` per flavor, of which at most
    # ``reservations_without_runtimes`` where nobody declares a runtime), for at most
    # ``reservation_timeout_seconds``.
    reservation_after_seconds: float = Field(default=0, ge=0, le=7 * 86400)
    reservation_timeout_seconds: float = Field(default=4 * 3600, gt=0, le=7 * 86400)
    reservations_per_flavor: int = Field(default=4, ge=1, le=64)
    reservations_without_runtimes: int = Field(default=1, ge=0, le=64)

    # leader election (coordination.k8s.io/v1 Lease)
    leader_election: bool = True
    lease_name: str = "kueue-tas"
    lease_namespace: str = "kueue-tas-system"
    # A standby takes over at most lease_duration + retry_period * 1.2 after the leader's last
    # renewal: 12 + 2.4 s keeps fail-over under 15 s. The leader gives up after renew_deadline (8 s),
    # well before anyone may take the lease.
    lease_duration_seconds: float = Field(default=12, gt=0)
    renew_deadline_seconds: float = Field(default=8, gt=0)
    retry_period_seconds: float = Field(default=2, gt=0)

    # serving and logging
    # kueue_tas_domain_free for the top N topology levels only (0: every level).
    metrics_domain_levels: int = Field(default=0, ge=0)
    # kueue_tas_domain_free of the kubernetes.io/hostname level too: one series per node and
    # resource (~40,000 at 10,000 nodes, most of /metrics), so only when asked for.
    metrics_hostname_level: bool = False
    # kueue_tas_domain_free_slots / kueue_tas_free_domains: how many pods of each shape still fit.
    # By default a whole 8-GPU node (the unit of multi-node training) and one GPU (how scattered
    # the free GPUs are); on a flavor without GPUs their series read 0. Environment: shapes
    # separated by ';' (a shape holds ',': "nvidia.com/gpu=8;nvidia.com/gpu=4,cpu=32").
    free_slot_shapes: Annotated[tuple[str, ...], NoDecode] = ("nvidia.com/gpu=8", "nvidia.com/gpu=1")
    # The levels (label keys or the Topology's level names) whose domains get a free-slot series
    # each; unset: every level but kubernetes.io/hostname (one series per node and shape would
    # be 10,000 per shape on a 10,000-node cluster). Free-domain counts cover every level.
    free_slot_levels: Annotated[tuple[str, ...] | None, NoDecode] = None
    health_bind: str = ":8081"
    metrics_bind: str = ":8080"
    # Who may read /metrics and the topology map (README "Who may look"). *_secure: served over
    # HTTPS, with tls.crt/tls.key from serving_cert_dir when set (e.g. cert-manager's Secret
    # mounted there; re-read when they change), else a certificate the process issues itself.
    # *_auth: each request needs a bearer token that the API server accepts (TokenReview) and
    # that may `get` the path (SubjectAccessReview: the ClusterRoles kueue-tas-metrics-reader and
    # kueue-tas-map-reader grant it). Turn them off only for local development, or behind a
    # loopback bind reached through `kubectl port-forward` (whose RBAC then decides who looks).
    # The health probes (health_bind) are always plain HTTP without authentication.
    metrics_secure: bool = True
    metrics_auth: bool = True
    map_secure: bool = True
    map_auth: bool = True
    serving_cert_dir: Path | None = None
    log_level: LogLevel = "info"
    log_format: LogFormat = "json"

    # The validating admission webhook (kueue_tas/webhook), served by every replica, leader or not.
    # "0": off. Its TLS certificate: the files tls.crt/tls.key in webhook_cert_dir when set (e.g.
    # cert-manager's Secret mounted there; re-read when they change), else one the controller
    # issues itself and keeps in the Secret webhook_secret of webhook_namespace, shared by the
    # replicas, with the CA written into the caBundle of the ValidatingWebhookConfiguration
    # webhook_configuration. The certificate names the Service webhook_service and webhook_hosts.
    webhook_bind: str = "0"
    webhook_cert_dir: Path | None = None
    webhook_namespace: str = "kueue-tas-system"
    webhook_secret: str = "kueue-tas-webhook-cert"
    webhook_configuration: str = "kueue-tas"
    webhook_service: str = "kueue-tas-webhook"
    webhook_hosts: Annotated[tuple[str, ...], NoDecode] = ()

    # The topology map page (read-only HTML, served by every replica: the leader from its live
    # model, a standby from a cluster read kept a few seconds). "0": off. The page reloads
    # itself every map_refresh_seconds (0: never).
    map_bind: str = "0"
    map_refresh_seconds: int = Field(default=30, ge=0, le=3600)

    # API server access; None = in-cluster service account, else $KUBECONFIG / ~/.kube/config
    kubeconfig: Path | None = None

    # Kueue's TAS feature gates that differ from Kueue v0.19.2's defaults (name -> enabled).
    # NoDecode: the environment gives "A=true,B=false", not JSON.
    feature_gates: Annotated[dict[str, bool], NoDecode] = Field(default_factory=dict)

    # ---- field checks --------------------------------------------------------------------------

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("annotation_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not value.endswith("/"):
            raise ValueError("must end with '/' (e.g. 'kueue-tas.io/')")
        domain = value[:-1]
        if not domain or len(domain) > 253 or not _DNS1123_SUBDOMAIN.match(domain):
            raise ValueError("must be a DNS subdomain followed by '/'")
        return value

    @field_validator("scheduling_gate", "controller_name")
    @classmethod
    def _check_qualified(cls, value: str) -> str:
        if not _is_qualified_name(value):
            raise ValueError("must be a Kubernetes qualified name like 'example.io/name'")
        return value

    @field_validator("lease_name")
    @classmethod
    def _check_lease_name(cls, value: str) -> str:
        if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value):
            raise ValueError("must be a DNS subdomain (lowercase letters, digits, '-', '.')")
        return value

    @field_validator("webhook_secret", "webhook_configuration")
    @classmethod
    def _check_object_name(cls, value: str) -> str:
        if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value):
            raise ValueError("must be a DNS subdomain (lowercase letters, digits, '-', '.')")
        return value

    @field_validator(
        "webhook_hosts", "daemonset_reservation_namespaces", "daemonset_reservation_priority_classes", mode="before"
    )
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        """``"127.0.0.1,localhost"`` (the environment's form) -> a tuple of names."""
        if isinstance(value, str):
            return tuple(h.strip() for h in value.split(",") if h.strip())
        return value

    @field_validator("free_slot_shapes", "free_slot_levels", mode="before")
    @classmethod
    def _split_lists(cls, value: Any, info: ValidationInfo) -> Any:
        """The environment's form: shapes separated by ';', levels by ','."""
        if isinstance(value, str):
            sep = ";" if info.field_name == "free_slot_shapes" else ","
            return tuple(part.strip() for part in value.split(sep) if part.strip())
        return value

    @field_validator("free_slot_shapes")
    @classmethod
    def _check_shapes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        texts: list[str] = []
        for text in value:
            try:
                shape = parse_pod_shape(text)
            except PodShapeError as exc:
                raise ValueError(str(exc)) from None
            if shape.text in texts:
                raise ValueError(f"pod shape {shape.text!r} is listed twice")
            texts.append(shape.text)
        return tuple(texts)

    @field_validator("free_slot_levels")
    @classmethod
    def _check_levels(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for level in value or ():
            if not _is_qualified_name(level):
                raise ValueError(f"{level!r} is not a level: expected a node label key or a level name")
        return value

    @field_validator("lease_namespace", "webhook_namespace", "webhook_service")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        if len(value) > 63 or not _DNS1123_LABEL.match(value):
            raise ValueError("must be a DNS label (lowercase letters, digits, '-')")
        return value

    @field_validator("daemonset_reservation_namespaces", "daemonset_reservation_priority_classes")
    @classmethod
    def _check_names(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        namespaces = info.field_name == "daemonset_reservation_namespaces"
        for name in value:
            if namespaces and (len(name) > 63 or not _DNS1123_LABEL.match(name)):
                raise ValueError(f"{name!r} is not a namespace name (a DNS label)")
            if not namespaces and (len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)):
                raise ValueError(f"{name!r} is not a PriorityClass name (a DNS subdomain)")
        return value

    @field_validator("health_bind", "metrics_bind", "webhook_bind", "map_bind")
    @classmethod
    def _check_bind(cls, value: str) -> str:
        parse_bind(value)
        return value.strip()

    @field_validator("kubeconfig", "webhook_cert_dir", "serving_cert_dir", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("feature_gates", mode="before")
    @classmethod
    def _split_gates(cls, value: Any) -> Any:
        """``"A=true,B=false"`` (Kueue's --feature-gates form) -> ``{"A": "true", "B": "false"}``."""
        if not isinstance(value, str):
            return value
        out: dict[str, str] = {}
        for part in value.split(","):
            name, sep, flag = part.strip().partition("=")
            if not part.strip():
                continue
            if not sep or not name.strip():
                raise ValueError(f"{part.strip()!r}: expected Name=true or Name=false")
            out[name.strip()] = flag.strip()
        return out

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        problems: list[str] = []
        if self.retry_backoff_max_seconds < self.retry_backoff_base_seconds:
            problems.append(
                f"retry_backoff_max_seconds ({self.retry_backoff_max_seconds}) must be >= "
                f"retry_backoff_base_seconds ({self.retry_backoff_base_seconds})"
            )
        health, metrics = parse_bind(self.health_bind), parse_bind(self.metrics_bind)
        if metrics is not None and metrics == health and (self.metrics_secure or self.metrics_auth):
            # The kubelet probes health_bind over plain HTTP without a token.
            problems.append(
                f"metrics_bind ({self.metrics_bind}) must differ from health_bind while metrics_secure or "
                "metrics_auth is on (the health probes are plain HTTP without a token)"
            )
        if self.leader_election:
            # client-go's rules: the leader must give up (renew deadline) before others may take the
            # lease (lease duration), and must be able to retry within the deadline.
            if self.renew_deadline_seconds >= self.lease_duration_seconds:
                problems.append(
                    f"renew_deadline_seconds ({self.renew_deadline_seconds}) must be < "
                    f"lease_duration_seconds ({self.lease_duration_seconds})"
                )
            if self.retry_period_seconds * 1.2 >= self.renew_deadline_seconds:
                problems.append(
                    f"retry_period_seconds ({self.retry_period_seconds}) * 1.2 must be < "
                    f"renew_deadline_seconds ({self.renew_deadline_seconds})"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # ---- sources -------------------------------------------------------------------------------

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Settings:
        """``from_file(path)`` when a path is given, else environment only; errors as ConfigError."""
        if path is not None:
            return cls.from_file(path, **overrides)
        with _config_errors(None):
            return cls(**overrides)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> Settings:
        """Settings from a YAML mapping at ``path``; the environment and ``overrides`` win over it."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read config file {p}: {e.strerror or e}") from e
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p} is not valid YAML: {e}") from e
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"config file {p} must hold a mapping of settings, got {type(data).__name__}")
        values: dict[str, Any] = {}
        unknown: list[str] = []
        for key, value in data.items():
            name = _CAMEL_HUMP.sub(lambda m: "_" + m.group(1).lower(), str(key)).replace("-", "_")
            if name not in cls.model_fields:
                unknown.append(str(key))
            values[name] = value
        if unknown:
            known = ", ".join(sorted(cls.model_fields))
            raise ConfigError(f"config file {p}: unknown setting(s) {', '.join(sorted(unknown))} (known: {known})")
        token = _FILE_VALUES.set(values)
        try:
            with _config_errors(p):
                return cls(**overrides)
        finally:
            _FILE_VALUES.reset(token)

    # ---- derived -------------------------------------------------------------------------------

    def health_address(self) -> tuple[str | None, int] | None:
        return parse_bind(self.health_bind)

    def metrics_address(self) -> tuple[str | None, int] | None:
        return parse_bind(self.metrics_bind)

    def webhook_address(self) -> tuple[str | None, int] | None:
        return parse_bind(self.webhook_bind)

    def map_address(self) -> tuple[str | None, int] | None:
        return parse_bind(self.map_bind)

    def pod_shapes(self) -> tuple[PodShape, ...]:
        """``free_slot_shapes`` read (each was checked when the settings were loaded)."""
        return tuple(parse_pod_shape(text) for text in self.free_slot_shapes)


def format_validation_error(err: ValidationError) -> str:
    """One line per problem: ``setting: message (got value)``."""
    lines = []
    for item in err.errors():
        loc = ".".join(str(x) for x in item["loc"]) or "settings"
        msg = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            msg = "unknown setting"
        got = item.get("input")
        shown = "" if loc == "settings" or isinstance(got, dict) or repr(got) in msg else f" (got {got!r})"
        lines.append(f"{loc}: {msg}{shown}")
    return "\n".join(lines)


@contextmanager
def _config_errors(path: Path | None) -> Iterator[None]:
    try:
        yield
    except ValidationError as e:
        where = f" in {path}" if path is not None else ""
        raise ConfigError(f"invalid kueue-tas settings{where}:\n{format_validation_error(e)}") from e
