"""kueue-tas: Topology Aware Scheduling for Kueue, as an AdmissionCheck controller."""

__version__ = "0.1.0"
