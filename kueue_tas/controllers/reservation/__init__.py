"""Reservations, as the admission asks for them: a workload that waited too long for a domain
while enough was free in total gets one held for it, and every decision respects the domains
held for others (backfill, or leaving the holder room).

``reserver`` (the view a decision respects, the reservation a waiting workload gets). The
registry lives on the shared floor (``controllers.domain_reservations``), since every
decision reads it.

Entry point: ``Reserver``. Never: reserve unless ``reservation_after_seconds`` is set."""

from kueue_tas.controllers.reservation.reserver import Reserver, stamp, waiting_since

__all__ = ["Reserver", "stamp", "waiting_since"]
