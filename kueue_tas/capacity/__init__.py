"""The capacity model: one set of rules from nodes, pods, DaemonSets and Workloads to free capacity
per flavor and domain, and the one workload placement over it (pure).

``rules`` (which nodes count, which pods are charged, which assignments are trusted), ``feed``
(applying them object by object or from lists), ``live`` (``LiveCapacity``, the incrementally
updated model the controller keeps; ``plan`` and ``describe`` fill the same), ``pod_slots``
(which bound pods fill which slots), ``hostnames`` (the one way from an assignment's hostname
value to its Node), ``daemonsets`` (the pods DaemonSets are about to create), ``node_health``
(which nodes under an admitted workload have failed), ``assignment_record`` (our record of what
we wrote), ``workload_placement`` (the requests of a workload, then its placement, as if some
workloads were gone or some domains closed: the admission decision, ``plan``, ``describe`` and
the map all call it), ``preemption`` (which lower-priority workloads, evicted, would clear a
domain for one that fits nowhere), ``reservation`` (domains held for workloads that waited too
long, and who may still use them), ``domain_usage`` (which workloads hold usage in which
domain), ``problem_text`` (the words of a refused request), ``trial_placement`` (where a pending
Workload would go now), ``workload_scope`` (the workload-wide constraint), ``pod_counts`` and
``workload_health`` (what ``describe`` and the map show), ``creation_checks`` (the webhook's
checks at creation).

Entry points: ``LiveCapacity``, ``feed_workload``, ``workload_requests``, ``place_workload``.
Never: do I/O or hold a clock of its own (the caller passes time in).
"""
