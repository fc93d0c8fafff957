"""The reconcilers, one folder each, all built and registered by :func:`setup.setup_controllers`
(``controllers/setup.py``, as Kueue's ``pkg/controller/tas/controllers.go``) onto the one
runtime Manager of ``kueue-tas run``.

Reconcilers (each folder: ``reconciler`` on the Manager, a pure ``plan`` and its ``writes``
where it has them):

* ``admission``: decides each Workload whose entry for one of our checks is Pending, and writes
  the decision;
* ``checkstatus``: the ``Active`` condition of each AdmissionCheck of ours;
* ``guard``: edits of our assignment annotation on admitted Workloads, restored or re-placed;
* ``repair``: admitted workloads on failed nodes, re-placed in one decision;
* ``ungate``: releases gated pods into their assigned domains;
* ``stray``: deletes the pods an assignment has no slot for;
* ``health``: the note and Events when a placement is no longer enforced;
* ``cache``: keeps the live capacity model current from the informers;
* ``gauges``: free capacity and free slots per domain, as metrics.

The floor they share (modules here): ``deps`` (``ControllerDeps``: informers, checks, Events,
metrics, settings, gates), ``informers`` (the shared informers and which checks are ours),
``decide`` (the pure decision, used by admission and repair) and ``decision_context`` (what
those two share to decide one at a time on one model), ``check_entry_writes`` (our check
entry, the assignment annotation and the gates, every entry write guarded by a
resourceVersion), ``check_flavors``, ``workload_annotations``, ``workload_events``,
``slice_pods``, ``health_note``, ``rewrites`` (a node repair's rewrites in flight) and
``timings``.

Never: a reconciler folder imports another (import-linter, ``pyproject.toml``); no reconciler
reads another's attributes: each gets its dependencies injected by ``setup``.
"""
