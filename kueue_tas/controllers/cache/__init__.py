"""The live capacity model kept current from the shared informers (Kueue's scheduler cache).

Entry point: :class:`CapacityCache` (``reconciler``). Never decides or writes anything: it
only routes events to the rules of ``kueue_tas.capacity``."""

from kueue_tas.controllers.cache.reconciler import CapacityCache

__all__ = ["CapacityCache"]
