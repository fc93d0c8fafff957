"""The keys tests build with: node label keys of topology levels and resources, and our annotation
and label keys, taken from ``kueue_tas.api.constants`` (never spelled again here).

Kueue's ``pkg/util/testing/defaults.go`` is the model: one place for the names every test uses,
so a test says ``RACK`` and a reader knows it is the usual rack level. A test whose point is the
literal text keeps it: hostile-input tables, the docs reference, wire formats, expected error
messages and rendered outputs, Kueue's cases as transcribed (``kueue_cases/``), and tests/dst.
"""

from __future__ import annotations

from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION, REGION_LABEL, ZONE_LABEL

# --- node labels: the levels of a Topology ---------------------------------------------------------
# Kueue's DefaultBlockTopologyLevel and DefaultRackTopologyLevel; the manifests' samples and the
# demo cluster use the same two.
BLOCK: Final = "cloud.provider.com/topology-block"
RACK: Final = "cloud.provider.com/topology-rack"
HOST: Final = c.HOSTNAME_LABEL
ZONE: Final = ZONE_LABEL
REGION: Final = REGION_LABEL

# --- resources ---------------------------------------------------------------------------------------
GPU: Final = "nvidia.com/gpu"

# --- our PodSet annotations (a Job's pod template, a Workload's PodSet) -------------------------------
REQUIRED: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_REQUIRED_TOPOLOGY
PREFERRED: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_PREFERRED_TOPOLOGY
UNCONSTRAINED: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_UNCONSTRAINED_TOPOLOGY
SLICE_LEVEL: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_SLICE_REQUIRED_TOPOLOGY
SLICE_SIZE: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_SLICE_SIZE
SLICE_CONSTRAINTS: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_SLICE_CONSTRAINTS
GROUP_NAME: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_GROUP_NAME
PREFERRED_WAIT: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_PREFERRED_WAIT

# --- our workload-wide annotations (the Job or JobSet itself, or the Workload) -------------------------
WORKLOAD_REQUIRED: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_WORKLOAD_REQUIRED_TOPOLOGY
WORKLOAD_PREFERRED: Final = c.DEFAULT_ANNOTATION_PREFIX + c.SUFFIX_WORKLOAD_PREFERRED_TOPOLOGY

# --- what we write ------------------------------------------------------------------------------------
ASSIGNMENT: Final = c.TOPOLOGY_ASSIGNMENT_ANNOTATION
KEPT_SLICES: Final = c.KEPT_SLICES_ANNOTATION
PREFERRED_WAIT_STARTED: Final = c.PREFERRED_WAIT_STARTED_ANNOTATION
WORKLOAD_LABEL: Final = c.WORKLOAD_LABEL
PODSET_LABEL: Final = c.PODSET_LABEL
GATED_LABEL: Final = c.GATED_LABEL
SCHEDULING_GATE: Final = c.SCHEDULING_GATE
CONTROLLER: Final = c.CONTROLLER_NAME

# --- an admin's Topology annotation -------------------------------------------------------------------
LEVEL_NAMES: Final = LEVEL_NAMES_ANNOTATION
