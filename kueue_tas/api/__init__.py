"""The objects kueue-tas reads, as typed models, and the names it reads and writes (pure).

Models of Kubernetes and Kueue objects (``core_objects``, ``kueue_objects``, ``workload``, over
``object_base``), which model reads a manifest (``kinds.parse_object``), the PodSets Kueue
builds from a Job, JobSet or Workload (``podsets``), resource quantities and Kueue's integer
units (``quantity``), a pod's effective requests (``resources``), pod shapes
(``pod_shape``), the shapes of the template fields placement reads (``shapes``), and every
annotation, label, gate and API group name of ours (``constants``).

Entry points: ``parse_object``, ``Workload``, ``podsets_of``, ``constants``.
Never: import anything else of kueue-tas, do I/O, or decide anything.
"""
