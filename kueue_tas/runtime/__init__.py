"""Runtime plumbing shared by the controllers.

config (Settings), logging (structlog setup), client (the only API-server client layer),
workqueue, metrics, health (HTTP endpoints), leader (Lease election), testing (virtual time).
"""
