"""Tests of kueue_tas.api: Kubernetes and Kueue objects as parsed models, quantities, pod requests."""
