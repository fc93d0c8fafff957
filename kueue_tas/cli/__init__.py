"""The commands: ``kueue-tas run / plan / describe / capacity / map / version`` (``main``, one
module per command), each importing its heavy modules only when it runs.

``run`` starts the controller (``controllers.setup`` wires the reconcilers onto the runtime's
manager); ``plan`` places a cluster dump offline (``planner``, over the capacity model and the
one workload placement); ``describe`` and ``capacity`` read the cluster once
(``cluster_read``) and explain a Workload or the free capacity (``describe_*``,
``daemonset_holds``); ``map`` serves or writes the topology map (``map_*``, over ``mapview``).

Entry point: ``main.main``.
Never: hold logic a reconciler needs (commands translate results into output and exit codes).
"""
