"""The capacity gauges: free capacity, free slots and free domains per topology domain.

Entry point: :class:`CapacityGauges` (``reconciler``). Never calls the API: computed from the
live model's snapshots."""

from kueue_tas.controllers.gauges.reconciler import CapacityGauges

__all__ = ["CapacityGauges"]
