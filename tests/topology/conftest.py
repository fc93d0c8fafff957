"""Tests of kueue_tas.topology, the engine on plain data: requests, placement, codec, free slots, why-not."""
