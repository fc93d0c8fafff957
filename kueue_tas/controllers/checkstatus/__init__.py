"""AdmissionCheck status: the ``Active`` condition of each check of ours.

Entry points: :class:`AdmissionCheckStatus` and its writer :class:`KubeCheckStatusWriter`
(``reconciler``). Never writes a Workload."""

from kueue_tas.controllers.checkstatus.reconciler import AdmissionCheckStatus, KubeCheckStatusWriter

__all__ = ["AdmissionCheckStatus", "KubeCheckStatusWriter"]
