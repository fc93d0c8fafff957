"""Tests of free capacity, free slots, placement health and patience (kueue_tas.topology.explain)."""
