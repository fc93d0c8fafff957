"""The ungater (Kueue's TopologyUngater): release gated pods into their assigned domains.

Entry points: :class:`Ungater` (``reconciler``) and its pod writer :class:`KubePodPatcher`
(``writes``); the pure pod-to-domain rules in ``plan``. Never more pods in a domain than its
count, and never a pod onto a node that cannot take it now."""

from kueue_tas.controllers.ungate.reconciler import Ungater
from kueue_tas.controllers.ungate.writes import KubePodPatcher

__all__ = ["KubePodPatcher", "Ungater"]
