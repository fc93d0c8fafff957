"""Topology-driven preemption, as the admission asks for it: a workload that holds quota but
fits no domain now, in a ClusterQueue that opted in (``<prefix>topology-preemption``), has the
cheapest set of lower-priority workloads evicted through Kueue to clear one.

``preemptor`` (the step, decided under the admission lock, its hold registered there),
``writes`` (the victims' Retry entries and the Events). The policy (the switch, who may be a
victim under the ClusterQueue's own ``spec.preemption``, their cost) is pure and shared with
``plan``: ``capacity.preemption_policy``; the holds live on the shared floor
(``controllers.domain_holds``), since every decision reads them.

Entry points: ``Preemptor``, ``carry_out``. Never: evict without the ClusterQueue's switch
set to Enabled, evict a workload of equal or higher priority, or choose a victim twice."""

from kueue_tas.controllers.preemption.preemptor import PreemptionStep, Preemptor
from kueue_tas.controllers.preemption.writes import carry_out

__all__ = ["PreemptionStep", "Preemptor", "carry_out"]
