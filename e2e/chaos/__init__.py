"""The chaos campaign (``python -m e2e.chaos``): random workloads and faults on a local cluster,
checked throughout by the invariant monitor (``e2e/monitor.py``)."""
