"""Topology health: the note on our Ready entry (``controllers.health_note``) and the Events
when an admitted workload's placement is no longer enforced by its Topology and nodes, and
when it is again.

Entry points: :class:`TopologyHealth` and its writer :class:`KubeEntryWriter`
(``reconciler``). Never turns an entry away from Ready, and never evicts."""

from kueue_tas.controllers.health.reconciler import KubeEntryWriter, TopologyHealth

__all__ = ["KubeEntryWriter", "TopologyHealth"]
