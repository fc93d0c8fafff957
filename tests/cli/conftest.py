"""Tests of kueue_tas.cli: plan, describe, capacity and the map, run in-process on objects and dumps."""
