"""Tests of kueue_tas.webhook: the admission webhook over HTTPS, as the apiserver and hostile callers meet it."""
