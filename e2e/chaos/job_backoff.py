"""When the Job controller will create a Job's missing pods again: its failure back-off.

Every pod of a Job that ends without succeeding counts as a failure, a deleted one too (the
Job controller's ``isPodFailed``: "count deleted Pods as failures"), whoever deleted it: pod GC
after a node deletion, a chaos ``pod_delete``, the stray-pod reaper removing a pod pinned to a
node that is gone. Before creating replacements the Job controller then waits 10 s doubled per
failure since the last success, at most 6 min (``DefaultJobPodFailureBackOff``,
``MaxJobPodFailureBackOff``, ``backoffRecord.getRemainingTime`` in Kubernetes'
``pkg/controller/job``). Six pods of one Job deleted at once: 320 s with no pod and no change
anywhere, which the end-of-run wait took for a stuck workload (chaos seed 828).

So the wait tracks each Job's ``status.failed``: from the moment the count is seen to change,
the Job is allowed the full back-off for that many failures. That is an upper bound (the
controller counts only failures since the last success, and the failures happened at or before
they were seen), so a Job that really is stuck is still caught once its bound has passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_BACKOFF_S = 10.0
MAX_BACKOFF_S = 360.0


def backoff_s(failures: int) -> float:
    """The longest the Job controller waits after ``failures`` failures (none: no wait)."""
    if failures <= 0:
        return 0.0
    return min(FIRST_BACKOFF_S * 2.0 ** min(failures - 1, 30), MAX_BACKOFF_S)


@dataclass
class JobBackoffs:
    """Job name -> (failed count, when that count was first seen)."""

    seen: dict[str, tuple[int, float]] = field(default_factory=dict)

    def observe(self, failed: dict[str, int], now: float) -> None:
        """``failed``: Job name -> its ``status.failed``."""
        for name, count in failed.items():
            if count and self.seen.get(name, (0, 0.0))[0] != count:
                self.seen[name] = (count, now)

    def waiting(self, now: float) -> dict[str, float]:
        """Jobs still inside their back-off -> seconds left."""
        left = {name: at + backoff_s(failed) - now for name, (failed, at) in self.seen.items()}
        return {name: round(s, 1) for name, s in sorted(left.items()) if s > 0}

    def last_end(self) -> float:
        """When the latest back-off seen ends (-inf: none seen)."""
        return max((at + backoff_s(failed) for failed, at in self.seen.values()), default=float("-inf"))
