"""The topology-health note on our Ready check entry's message (pure).

A Ready entry's message is the admission summary followed by our assignment record
(``capacity.assignment_record``: it must stay the message's end, or tampering detection
would lose it). While a workload's placement is not enforced, the message starts with the
problems and ``placement not enforced.``; once it is enforced again that prefix goes and the
message is what admission wrote. The note is the only state: it survives restarts and
fail-overs, and whatever else rewrites the message (a repair, a new admission) keeps or drops
it without this module's help.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kueue_tas.capacity.assignment_record import record_text
from kueue_tas.controllers.decide import CHECK_MESSAGE_LIMIT

NOT_ENFORCED: Final = "placement not enforced"
_END: Final = f"; {NOT_ENFORCED}. "
# The problems are cut to this many characters on the entry (the Event carries them whole).
NOTE_LIMIT: Final = 4096


def note_of(message: str) -> str:
    """The problems the message names ("" when it has no note)."""
    at = message.find(_END)
    return message[:at] if at >= 0 else ""


def without_note(message: str) -> str:
    """The message as admission (or a repair) wrote it."""
    at = message.find(_END)
    return message[at + len(_END) :] if at >= 0 else message


def note_text(problems: Sequence[str]) -> str:
    """The note for ``problems`` ("" for none), as it appears on the entry."""
    text = "; ".join(problems)
    if len(text) > NOTE_LIMIT:
        text = text[: NOTE_LIMIT - 3] + "..."
    return text


def with_note(message: str, problems: Sequence[str]) -> str:
    """``message`` saying ``problems`` (none: the message without a note), within Kueue's
    limit on the entry message; what is cut is the summary, never the record."""
    base = without_note(message)
    note = note_text(problems)
    if not note:
        return base
    out = f"{note}{_END}{base}"
    if len(out) <= CHECK_MESSAGE_LIMIT:
        return out
    record = record_text(base)
    room = CHECK_MESSAGE_LIMIT - len(note) - len(_END) - len(record)
    return f"{note}{_END}{base[: max(room - 3, 0)]}...{record}"
