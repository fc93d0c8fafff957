"""Runtime plumbing shared by the controllers.

manager (the API client, shared informers, their start and sync, readiness, lag metrics),
config (Settings), logging (structlog setup), workqueue, metrics, health (HTTP endpoints),
leader (Lease election), testing (virtual time).
"""
