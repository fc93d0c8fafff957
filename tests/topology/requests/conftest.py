"""Tests of reading and checking a PodSet's request (kueue_tas.topology.requests)."""
