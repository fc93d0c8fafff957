"""Tests of the assignment wire format (kueue_tas.topology.codec)."""
