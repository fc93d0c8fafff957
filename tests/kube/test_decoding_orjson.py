"""Watch and list decoding goes through orjson, with the standard library behind it."""

from __future__ import annotations

import pytest

from kueue_tas.kube.decoding import decode


def test_a_watch_line_decodes_and_managed_fields_are_cut() -> None:
    line = (
        b'{"type":"ADDED","object":{"metadata":{"name":"p","managedFields":[{"manager":"x"}]},"spec":{"nodeName":"n"}}}'
    )
    assert decode(line, strip=True) == {
        "type": "ADDED",
        "object": {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}},
    }


def test_json_orjson_refuses_still_decodes() -> None:
    huge = 2**70
    assert decode(f'{{"spec":{{"n":{huge}}}}}'.encode()) == {"spec": {"n": huge}}


@pytest.mark.parametrize("data", [b"{", b'{"a":1} x', b""])
def test_garbage_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)
