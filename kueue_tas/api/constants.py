"""Names kueue-tas reads and writes: annotations, labels, gates, API groups.

Everything that is a string on the wire lives here, so a rename touches one file.
"""

from __future__ import annotations

from typing import Final

# --- our own names ----------------------------------------------------------------------------

DEFAULT_ANNOTATION_PREFIX: Final = "kueue-tas.io/"
# The prefix under which Kueue itself reads the same annotations (for clusters that turned
# Kueue's TAS off and keep their manifests unchanged).
KUEUE_ANNOTATION_PREFIX: Final = "kueue.x-k8s.io/"

# Suffixes of the pod-template annotations; the full key is prefix + suffix.
SUFFIX_REQUIRED_TOPOLOGY: Final = "podset-required-topology"
SUFFIX_PREFERRED_TOPOLOGY: Final = "podset-preferred-topology"
SUFFIX_UNCONSTRAINED_TOPOLOGY: Final = "podset-unconstrained-topology"
SUFFIX_SLICE_REQUIRED_TOPOLOGY: Final = "podset-slice-required-topology"
SUFFIX_SLICE_SIZE: Final = "podset-slice-size"
# A JSON list of {"topology": <level>, "size": <n>}, coarsest first (Kueue's multi-layer slices).
SUFFIX_SLICE_CONSTRAINTS: Final = "podset-slice-required-topology-constraints"
# PodSets of one workload with the same group name are placed together (e.g. leader + workers).
SUFFIX_GROUP_NAME: Final = "podset-group-name"
# How long a preferred PodSet waits for one domain of its preferred level (kueue-tas's patience).
SUFFIX_PREFERRED_WAIT: Final = "podset-preferred-topology-wait"

# On the Job or JobSet itself (or the Workload): every PodSet in one domain of that level
# (kueue-tas's workload-wide constraint, ``topology/workload_domain``).
SUFFIX_WORKLOAD_REQUIRED_TOPOLOGY: Final = "workload-required-topology"
SUFFIX_WORKLOAD_PREFERRED_TOPOLOGY: Final = "workload-preferred-topology"
WORKLOAD_ANNOTATION_SUFFIXES: Final = (SUFFIX_WORKLOAD_REQUIRED_TOPOLOGY, SUFFIX_WORKLOAD_PREFERRED_TOPOLOGY)

TOPOLOGY_ANNOTATION_SUFFIXES: Final = (
    SUFFIX_REQUIRED_TOPOLOGY,
    SUFFIX_PREFERRED_TOPOLOGY,
    SUFFIX_UNCONSTRAINED_TOPOLOGY,
    SUFFIX_SLICE_REQUIRED_TOPOLOGY,
    SUFFIX_SLICE_SIZE,
    SUFFIX_SLICE_CONSTRAINTS,
    SUFFIX_GROUP_NAME,
    SUFFIX_PREFERRED_WAIT,
)

CONTROLLER_NAME: Final = "kueue-tas.io/topology"
SCHEDULING_GATE: Final = "kueue-tas.io/topology"
FIELD_MANAGER: Final = "kueue-tas"

# Workload annotation: when its first wait for a preferred domain began (RFC 3339, UTC).
PREFERRED_WAIT_STARTED_ANNOTATION: Final = "kueue-tas.io/preferred-wait-started"

# Workload annotation holding {"podSets": [{"name", "topologyAssignment"}]} as JSON.
TOPOLOGY_ASSIGNMENT_ANNOTATION: Final = "kueue-tas.io/topology-assignment"
# On a ClusterQueue, after the annotation prefix: Enabled | DryRun | Disabled (the default).
SUFFIX_TOPOLOGY_PREEMPTION: Final = "topology-preemption"
# On a preemptor's Workload: the domain cleared for it and until when it is held (JSON), so a
# restart or a requeue keeps the hold.
PREEMPTION_HOLD_ANNOTATION: Final = "kueue-tas.io/preemption-hold"
# On a Workload that does not fit: since when it has waited for a domain (RFC 3339), and the
# domain reserved for it (JSON), so Kueue's requeues and a restart keep both.
WAITING_SINCE_ANNOTATION: Final = "kueue-tas.io/waiting-since"
RESERVATION_ANNOTATION: Final = "kueue-tas.io/reservation"

# Workload annotation on a new elastic slice: the workload labels (our ``WORKLOAD_LABEL`` values,
# comma-separated, newest first) of the earlier slices whose running pods its assignment
# includes, written with its assignment so they stay its pods once those Workloads are deleted.
KEPT_SLICES_ANNOTATION: Final = "kueue-tas.io/kept-slice-pods"

# Labels we put on pods through the check's podSetUpdates.
WORKLOAD_LABEL: Final = "kueue-tas.io/workload"
PODSET_LABEL: Final = "kueue-tas.io/podset"
# On the pods of a PodSet the ungater places (value "true"): the pod webhook gives every pod that
# carries it our scheduling gate at creation, whatever became of the gate in the Job's template.
GATED_LABEL: Final = "kueue-tas.io/gated"
GATED_LABEL_VALUE: Final = "true"

# --- Kueue names we read ----------------------------------------------------------------------

KUEUE_QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_PODSET_LABEL: Final = "kueue.x-k8s.io/podset"
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
KUEUE_WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"
KUEUE_LOCAL_QUEUE_LABEL: Final = "kueue.x-k8s.io/local-queue-name"
KUEUE_CLUSTER_QUEUE_LABEL: Final = "kueue.x-k8s.io/cluster-queue-name"
KUEUE_TOPOLOGY_GATE: Final = "kueue.x-k8s.io/topology"
KUEUE_DEFAULT_PODSET_NAME: Final = "main"
# On a Workload that replaces an admitted slice of an elastic job: "<namespace>/<name>" of that slice.
KUEUE_SLICE_REPLACEMENT_ANNOTATION: Final = "kueue.x-k8s.io/workload-slice-replacement-for"

# Kueue condition types and admission-check states.
CONDITION_QUOTA_RESERVED: Final = "QuotaReserved"
CONDITION_ADMITTED: Final = "Admitted"
CONDITION_EVICTED: Final = "Evicted"
CONDITION_FINISHED: Final = "Finished"
CONDITION_ACTIVE: Final = "Active"  # AdmissionCheck

CHECK_STATE_PENDING: Final = "Pending"
CHECK_STATE_READY: Final = "Ready"
CHECK_STATE_RETRY: Final = "Retry"
CHECK_STATE_REJECTED: Final = "Rejected"
CHECK_STATES: Final = (CHECK_STATE_PENDING, CHECK_STATE_READY, CHECK_STATE_RETRY, CHECK_STATE_REJECTED)

# --- Kubernetes / Job / JobSet names we read --------------------------------------------------

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
JOB_COMPLETION_INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"
JOB_COMPLETION_INDEX_ANNOTATION: Final = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
JOB_CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"

JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL: Final = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_REPLICATED_JOB_NAME_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_REPLICATED_JOB_REPLICAS_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_JOB_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-index"
JOBSET_JOB_GLOBAL_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-global-index"

NODE_READY_CONDITION: Final = "Ready"
POD_PHASE_SUCCEEDED: Final = "Succeeded"
POD_PHASE_FAILED: Final = "Failed"
TERMINAL_POD_PHASES: Final = frozenset({POD_PHASE_SUCCEEDED, POD_PHASE_FAILED})

# --- API groups and versions ------------------------------------------------------------------

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VERSION: Final = "v1beta2"
KUEUE_API_VERSION: Final = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
# Versions we accept on input. Topology existed in v1alpha1 before v1beta1/v1beta2.
KUEUE_TOPOLOGY_INPUT_VERSIONS: Final = ("v1alpha1", "v1beta1", "v1beta2")
KUEUE_INPUT_VERSIONS: Final = ("v1beta1", "v1beta2")

BATCH_GROUP: Final = "batch"
BATCH_API_VERSION: Final = "batch/v1"
CORE_API_VERSION: Final = "v1"
APPS_GROUP: Final = "apps"
APPS_API_VERSION: Final = f"{APPS_GROUP}/v1"

JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
JOBSET_API_VERSION: Final = f"{JOBSET_GROUP}/{JOBSET_VERSION}"

KIND_TOPOLOGY: Final = "Topology"
KIND_RESOURCE_FLAVOR: Final = "ResourceFlavor"
KIND_ADMISSION_CHECK: Final = "AdmissionCheck"
KIND_CLUSTER_QUEUE: Final = "ClusterQueue"
KIND_LOCAL_QUEUE: Final = "LocalQueue"
KIND_WORKLOAD: Final = "Workload"
KIND_NODE: Final = "Node"
KIND_POD: Final = "Pod"
KIND_JOB: Final = "Job"
KIND_JOBSET: Final = "JobSet"
KIND_DAEMONSET: Final = "DaemonSet"
