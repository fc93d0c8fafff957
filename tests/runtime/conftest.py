"""Tests of kueue_tas.runtime: settings, health and metrics servers, leader election, the work queue."""
