"""Stray pods: delete the pods of an admitted workload its current assignment has no slot for.

Entry points: :class:`StrayPods` and its writer :class:`KubePodDeleter` (``reconciler``); the
pure rule in ``plan``. Never deletes within ``stray_pod_grace_seconds``, never a pod without
our workload label, never while the record is tampered with or a decision of ours is being
written."""

from kueue_tas.controllers.stray.reconciler import KubePodDeleter, StrayPods

__all__ = ["KubePodDeleter", "StrayPods"]
