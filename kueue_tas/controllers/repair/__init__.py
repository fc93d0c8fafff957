"""Node repair: an admitted workload on failed nodes is re-placed in one decision (only the
failed nodes' pods move), or waits / is requeued by the policy.

Entry point: :class:`NodeRepair` (``reconciler``); the pure parts in ``plan``, the three
guarded writes and what each failure does in ``writes``. Never moves a pod off a node that
serves, and never lets the added slots go before the informer shows the new assignment."""

from kueue_tas.controllers.repair.reconciler import NodeRepair

__all__ = ["NodeRepair"]
