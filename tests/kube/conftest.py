"""Tests of kueue_tas.kube: the client, informers and decoding, against fake API servers."""
