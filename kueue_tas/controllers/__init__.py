"""The reconcilers, one concern each, wired by ``kueue-tas run`` onto one runtime Manager.

informers (the shared informers every reconciler reads, and which AdmissionChecks are ours),
capacity_cache (keeps the live capacity model current from the informers), admission (workload
decisions; pure core in decide, writes in admission_writes), admissioncheck (the checks' Active
condition), ungater (pure core in ungate_plan), capacity_gauges (free capacity per domain).

No reconciler reads another's attributes: each gets its dependencies injected.
"""
