"""Kubernetes and Go syntax rules the webhook applies to annotation values, with their texts.

Go's ``strconv.ParseBool`` / ``ParseInt(v, 10, 32)`` and apimachinery's label-name
validation (``metavalidation.ValidateLabelName``), reproduced so that a value accepted
or refused here is accepted or refused by Kueue's webhook, with the same message.
"""

from __future__ import annotations

import re

from kueue_tas.api.object_base import INT32_MAX

INT32_MIN = -(2**31)


# --- Go-compatible scalar parsing -------------------------------------------------------------

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_GO_DECIMAL_INT = re.compile(r"^[+-]?[0-9]+$")


def parse_go_bool(value: str) -> bool | None:
    """Go's ``strconv.ParseBool``: the accepted spellings of true/false, else None."""
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    return None


def parse_go_int32(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 32)``: optional sign, ASCII digits, int32 range; else None."""
    if not _GO_DECIMAL_INT.fullmatch(value):
        return None
    number = int(value)
    if number < INT32_MIN or number > INT32_MAX:
        return None
    return number


# --- label-name validation (apimachinery IsQualifiedName / metavalidation.ValidateLabelName) ---

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME_FMT}$")
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def label_name_errors(value: str) -> list[str]:
    """Problems with ``value`` as a label key (optional DNS-subdomain prefix, '/', name)."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 bytes")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                detail = _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                errors.append("prefix part " + detail)
    else:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not _NAME_RE.fullmatch(name):
        errors.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


# --- label-value validation (apimachinery IsValidLabelValue) ----------------------------------

LABEL_VALUE_MAX_LENGTH = 63
_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def label_value_errors(value: str) -> list[str]:
    """Problems with ``value`` as a label value, in apimachinery's words ([] when valid)."""
    errors = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        errors.append(f"must be no more than {LABEL_VALUE_MAX_LENGTH} characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


_DURATION = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:h|m|s)")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: str) -> float | None:
    """A duration as Go's ``time.ParseDuration`` writes the common ones (``90s``, ``10m``,
    ``1h30m``, ``1.5h``; hours, minutes, seconds), in seconds; None when it is not one."""
    if not value or len(value) > 64 or not re.fullmatch(f"(?:{_DURATION.pattern})+", value):
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
