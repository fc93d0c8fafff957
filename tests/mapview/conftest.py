"""Tests of kueue_tas.mapview: the topology map's model and page."""
