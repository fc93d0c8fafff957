"""The assignment guard: an edit of our assignment annotation on an admitted Workload is
restored from our record, or our entry turns Retry so the workload is placed afresh.

Entry point: :class:`AssignmentGuard` (``reconciler``). Never restores over a node repair of
ours in flight (``controllers.rewrites``)."""

from kueue_tas.controllers.guard.reconciler import AssignmentGuard

__all__ = ["AssignmentGuard"]
