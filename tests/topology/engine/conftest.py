"""Tests of the placement engine (kueue_tas.topology.engine)."""
