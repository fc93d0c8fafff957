"""Which assignment annotations a node repair of ours is rewriting right now: the one piece of
state the repair shares with the assignment guard (not tampering), the ungater (release
nothing meanwhile) and the stray-pod rule (a pod either assignment keeps stays);
``controllers/setup.py`` wires one instance into all four."""

from __future__ import annotations

from collections.abc import Callable

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key


class OurRewrites:
    """Annotation texts another reconciler of ours is writing over an admitted workload's
    assignment (a node repair), by workload key. Between that annotation write and the entry
    write that records it, the annotation departs from the record: that is us, not an edit."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._on_done: list[Callable[[str], None]] = []

    def expect(self, key: str, text: str) -> None:
        self._texts[key] = text

    def done(self, key: str) -> None:
        if self._texts.pop(key, None) is not None:
            for notify in self._on_done:
                notify(key)

    def writing(self, key: str) -> bool:
        """Whether a rewrite of ours is in progress for the workload ``key``."""
        return key in self._texts

    def text(self, key: str) -> str | None:
        """The annotation a rewrite of ours in progress for ``key`` writes (None: none)."""
        return self._texts.get(key)

    def when_done(self, notify: Callable[[str], None]) -> None:
        """Call ``notify(key)`` whenever a rewrite ends (landed or dropped)."""
        self._on_done.append(notify)

    def ours(self, wl: Workload) -> bool:
        text = self._texts.get(workload_key(wl))
        return text is not None and wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) == text
