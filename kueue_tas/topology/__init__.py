"""The placement engine and what surrounds it: pure, plain data in and out, no I/O.

Wings (each package's ``__init__`` says what it offers; outside code enters through those):

* ``requests``: what a PodSet asks for, read from annotations or ``topologyRequest`` and checked
  against a Topology's levels and the workload's other PodSets.
* ``codec``: the assignment wire format (Kueue's ``TopologyAssignment``, our annotation).
* ``engine``: Kueue's TAS algorithms over one flavor's snapshot (``TopologySnapshot.place``).
* ``explain``: free capacity, free slots, placement health and patience, for readers.
* ``admitted``: follow-ups of admitted workloads (elastic slices, ``plan``'s re-placements).

Ground modules every wing may use: ``model`` (the engine's plain input types), ``assignment``
(a placed PodSet), ``features`` (Kueue's TAS feature gates), ``messages`` (Kueue's failure
texts), ``kube_syntax`` (Kubernetes' syntax rules for values), ``level_names`` (names for a
Topology's levels) and ``flavors`` (which flavors we govern, on which Topology).

Layers (pyproject.toml, import-linter): explain | admitted > engine > requests | codec > ground.
Never: read the API, a clock or the environment; the capacity model that feeds the engine is
``kueue_tas.capacity``, one layer up.
"""
