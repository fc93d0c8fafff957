"""Write timings more than one reconciler keeps: how long an unanswered write may still land,
and the cap on a failed write's backoff."""

from __future__ import annotations

from typing import Final

# An entry write that got no answer may still be applied until the apiserver's own request
# timeout (60 s by default) runs out: its capacity stays held and the Workload is re-read only then.
UNKNOWN_WRITE_SETTLE_SECONDS: Final = 65.0
# Backoff after a failed write or re-read: 1, 2, 4 ... seconds, and never more than this
# (also the cap on a server's Retry-After).
WRITE_RETRY_MAX_SECONDS: Final = 60.0
