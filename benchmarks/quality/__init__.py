"""Placement quality: a discrete-event simulator driving the product's own placement (issue 31).

    .venv/bin/python -m benchmarks.quality [--shape A|B|C|all] [--policy NAME|all] [--seeds 1,2,3]
                                           [--hours 300] [--warmup 48] [--load 0.9]
                                           [--no-runtimes] [--priorities] [--json FILE]
    make bench-quality BENCH_QUALITY_ARGS="..."

Jobs arrive (Poisson), wait in Kueue's BestEffortFIFO queue and are placed by the product's
pipeline (``workload_requests`` from a pod template carrying ``kueue-tas.io/podset-required-
topology``, then ``place_workload``) on the product's ``LiveCapacity``, which holds every
running job's assignment (``sim``); nothing bypasses the engine. Policies (``policies``,
``topology_policies``): ``kueue-exact`` (Kueue's placement as it is), ``reserve``, ``preempt``
and ``both``, the last three through ``kueue_tas.capacity.reservation`` and
``kueue_tas.capacity.preemption``.

Shapes (``shapes``; levels block > rack > kubernetes.io/hostname, resource nvidia.com/gpu):
A = 1 block x 10 racks x 64 hosts x 8 GPUs; B = kueue#10406's NVL72 cluster, 33 racks x 18
nodes x 4 GPUs, all in one block (NVL72 has no level above the rack); C = 16 blocks x 16 racks
x 8 hosts x 8 GPUs.

The mix (``trace.JobMix``, every parameter in that one dataclass; host counts scale with the
shape's rack, R hosts):

* small, 60 % of jobs: 1-8 one-GPU pods (at most a host's GPUs), half required on one host,
  half unconstrained; runtime median 0.5 h;
* medium, 30 %: 2 to max(3, R/4) whole-host pods, rack required; median 1 h;
* large, 10 %: 60 % rack-sized (R/2 to R whole-host pods, rack required), 40 % multi-rack
  (R+1 to max(2R, min(half a block, a fifth of the cluster)) pods, block required); median 2 h.

True runtimes are lognormal (sigma 1) clipped to [1 min, 24 h]; each job declares a maximum
runtime (Kueue's ``spec.maximumExecutionTimeSeconds``) of its true runtime times U(1, 3), or none
with ``--no-runtimes``. With ``--priorities`` large jobs have priority 1, the others 0. The
arrival rate makes the expected offered load ``--load`` (default 0.9) of the cluster's GPUs.
Figures: ``figures``.
"""
