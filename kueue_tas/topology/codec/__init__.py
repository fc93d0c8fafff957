"""The assignment wire format: Kueue's ``TopologyAssignment`` shapes (``wire``, pydantic) and
our Workload annotation holding one per PodSet (``codec``).

Entry points: ``decode_assignment_annotation``, ``encode_assignment_annotation``.
Never: decide anything; a value it cannot read is an ``AssignmentFormatError`` naming the field.
"""

from __future__ import annotations

from kueue_tas.topology.codec.codec import (
    AssignmentFormatError,
    decode_assignment_annotation,
    encode_assignment_annotation,
    encode_v1beta2,
)

__all__ = ["AssignmentFormatError", "decode_assignment_annotation", "encode_assignment_annotation", "encode_v1beta2"]
