"""Workload admission: decide each Workload whose entry for one of our checks is Pending (the
pure decision is ``controllers.decide``, shared with the node repair) and write it: gates,
assignment annotation, check entry, Event.

Entry point: :class:`WorkloadAdmission` (``reconciler``). Never writes a Ready entry without
the resourceVersion the decision saw, and never gives capacity twice (a decision is made under
the one lock of ``DecisionContext``, against what every earlier one assumed)."""

from kueue_tas.controllers.admission.reconciler import WorkloadAdmission

__all__ = ["WorkloadAdmission"]
