"""e2e tests written without a free cluster: not collected (the lead moves them to e2e/tests)."""
