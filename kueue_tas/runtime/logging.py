"""Structured logging: one event name plus key=value fields per line.

``configure_logging("info", "json")`` makes every line a JSON object
``{"event": "workload_admitted", "workload": "ns/name", "level": "info", "timestamp": "...Z"}``
(ISO 8601, UTC). ``fmt="console"`` renders the same fields for humans. Records sent to the
standard ``logging`` module (aiohttp, kubernetes_asyncio) go through the same renderer, so the
output stream stays uniform.

Usage: ``log = get_logger(__name__); log.info("ungated", workload=key, pods=3)``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import Processor

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

_HANDLER_NAME = "kueue-tas"


def _event_first(_logger: Any, _name: str, event_dict: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """Put timestamp, level and event first so JSON lines read naturally."""
    head = {k: event_dict.pop(k) for k in ("timestamp", "level", "event") if k in event_dict}
    head.update(event_dict)
    return head


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure_logging(
    level: str = "info",
    fmt: Literal["json", "console"] = "json",
    *,
    stream: TextIO | None = None,
    colors: bool | None = None,
) -> None:
    """Set up structlog and the stdlib root logger. Safe to call again (replaces the setup)."""
    try:
        numeric = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(LEVELS)})") from None
    out = stream if stream is not None else sys.stderr

    renderer: Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        exc: list[Processor] = [
            structlog.processors.ExceptionRenderer(structlog.tracebacks.ExceptionDictTransformer(show_locals=False)),
            _event_first,
        ]
    elif fmt == "console":
        use_colors = colors if colors is not None else bool(getattr(out, "isatty", lambda: False)())
        renderer = structlog.dev.ConsoleRenderer(colors=use_colors)
        exc = []
    else:
        raise ValueError(f"unknown log format {fmt!r} (json or console)")

    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.processors.StackInfoRenderer(),
            *exc,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )

    # stdlib records (libraries) -> same fields, same renderer.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *exc, renderer],
    )
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # Libraries that are chatty at INFO/DEBUG stay at WARNING unless we debug.
    for noisy in ("aiohttp.access", "kubernetes_asyncio.client.rest"):
        logging.getLogger(noisy).setLevel(logging.WARNING if numeric < logging.WARNING else numeric)


def reset_logging() -> None:
    """Undo ``configure_logging`` (structlog defaults, our root handler removed)."""
    structlog.reset_defaults()
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.setLevel(logging.WARNING)


def get_logger(name: str | None = None, **initial: Any) -> Any:
    """A structlog logger bound with ``logger=name`` (if given) and ``initial`` fields."""
    if name:
        initial = {"logger": name, **initial}
    return _LazyLogger(initial) if initial else structlog.get_logger()


class _LazyLogger:
    """Binds on use: module-level loggers are made at import, before ``configure_logging`` runs,
    and a logger bound then would keep the default (console) configuration for good."""

    __slots__ = ("_initial",)

    def __init__(self, initial: dict[str, Any]) -> None:
        self._initial = initial

    def __getattr__(self, name: str) -> Any:
        return getattr(structlog.get_logger().bind(**self._initial), name)
