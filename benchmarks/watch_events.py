"""Realistic Node and Pod watch-event lines, as the API server sends them (for ``informer.py``).

The objects carry what real ones do (labels, annotations, managedFields, status, volumes,
container statuses); pods come in 64-pod Jobs over 20 namespaces, spread over the nodes of a
zone / block / rack topology (5,000 nodes a zone, 250 a block, 25 a rack).
"""

from __future__ import annotations

import json
from typing import Any

LEVELS = ("example.com/zone", "example.com/block", "example.com/rack")
_SEP = (",", ":")


def node_dict(i: int) -> dict[str, Any]:
    z, b, r = i // 5000, i // 250, i // 25
    name = f"node-z{z}-b{b}-r{r}-h{i}"
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": "gpu-8x-h100",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "gpu-8x-h100",
        "topology.kubernetes.io/region": "region-1",
        "topology.kubernetes.io/zone": f"region-1{'abc'[z % 3]}",
        LEVELS[0]: f"z{z}",
        LEVELS[1]: f"z{z}-b{b}",
        LEVELS[2]: f"z{z}-b{b}-r{r}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.runtime.major": "12",
        "feature.node.kubernetes.io/network-sriov.capable": "true",
        "cloud.example.com/pool": "training",
    }
    images = [
        {
            "names": [f"registry.example.com/img{k}@sha256:{k:064x}", f"registry.example.com/img{k}:v{k}"],
            "sizeBytes": 10**9 + k,
        }
        for k in range(8)
    ]
    conditions = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": f"Kubelet{t}",
            "message": f"kubelet reports {t}",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    resources = {
        "cpu": "192",
        "memory": "2113556480Ki",
        "pods": "110",
        "nvidia.com/gpu": "8",
        "ephemeral-storage": "3750000000Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(1_000_000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{i:017x}"}),
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}},
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}, "f:nodeInfo": {}}},
                },
            ],
        },
        "spec": {
            "podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24",
            "podCIDRs": [f"10.{i // 256 % 256}.{i % 256}.0/24"],
            "providerID": f"cloud:///region-1/i-{i:017x}",
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.{i // 256 % 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": f"{i:032x}",
                "bootID": f"{i:032x}",
                "kernelVersion": "6.8.0-1015",
                "osImage": "Ubuntu 24.04 LTS",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": "v1.36.3",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


POD_TEMPLATE: dict[str, Any] = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "@NAME@",
        "generateName": "@JOB@-",
        "namespace": "@NS@",
        "uid": "@UID@",
        "resourceVersion": "@RV@",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {
            "batch.kubernetes.io/controller-uid": "@JOBUID@",
            "batch.kubernetes.io/job-name": "@JOB@",
            "controller-uid": "@JOBUID@",
            "job-name": "@JOB@",
            "batch.kubernetes.io/job-completion-index": "@IDX@",
            "kueue.x-k8s.io/podset": "main",
            "kueue-tas.io/workload": "job-@JOB@-1a2b3",
            "kueue-tas.io/podset": "main",
        },
        "annotations": {
            "batch.kubernetes.io/job-completion-index": "@IDX@",
            "kueue-tas.io/podset-required-topology": "example.com/rack",
            "kueue.x-k8s.io/workload": "job-@JOB@-1a2b3",
        },
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "@JOB@",
                "uid": "@JOBUID@",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {
                        "f:annotations": {".": {}, "f:batch.kubernetes.io/job-completion-index": {}},
                        "f:generateName": {},
                        "f:labels": {
                            ".": {},
                            "f:batch.kubernetes.io/controller-uid": {},
                            "f:batch.kubernetes.io/job-name": {},
                        },
                        "f:ownerReferences": {".": {}, 'k:{"uid":"@JOBUID@"}': {}},
                    },
                    "f:spec": {
                        "f:containers": {
                            'k:{"name":"main"}': {
                                ".": {},
                                "f:image": {},
                                "f:name": {},
                                "f:resources": {
                                    ".": {},
                                    "f:limits": {"f:nvidia.com/gpu": {}},
                                    "f:requests": {"f:cpu": {}, "f:memory": {}},
                                },
                            }
                        },
                        "f:restartPolicy": {},
                        "f:schedulerName": {},
                    },
                },
            },
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:05Z",
                "fieldsType": "FieldsV1",
                "subresource": "status",
                "fieldsV1": {
                    "f:status": {
                        "f:conditions": {},
                        "f:containerStatuses": {},
                        "f:hostIP": {},
                        "f:phase": {},
                        "f:podIP": {},
                    }
                },
            },
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/train:v1.2.3",
                "command": ["python", "train.py"],
                "args": ["--epochs", "10"],
                "env": [{"name": "RANK", "value": "@IDX@"}, {"name": "WORLD_SIZE", "value": "64"}],
                "resources": {
                    "limits": {"nvidia.com/gpu": "8"},
                    "requests": {"cpu": "@CPU@", "memory": "256Gi", "nvidia.com/gpu": "8"},
                },
                "volumeMounts": [
                    {
                        "name": "kube-api-access-@SUFFIX@",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": "@NODE@",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "nodeSelector": {"example.com/rack": "@RACK@"},
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "volumes": [
            {
                "name": "kube-api-access-@SUFFIX@",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            }
        ],
    },
    "status": {
        "phase": "@PHASE@",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:03Z"}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "@HOSTIP@",
        "hostIPs": [{"ip": "@HOSTIP@"}],
        "podIP": "@PODIP@",
        "podIPs": [{"ip": "@PODIP@"}],
        "startTime": "2026-01-01T00:00:01Z",
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": "2026-01-01T00:00:04Z"}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": "registry.example.com/train:v1.2.3",
                "imageID": "registry.example.com/train@sha256:" + "0123456789abcdef" * 4,
                "containerID": "containerd://@CID@",
                "started": True,
            }
        ],
        "qosClass": "Burstable",
    },
}


def pod_event_lines(n_pods: int, n_nodes: int, event: str, phase: str, rv_base: int) -> list[bytes]:
    """Watch-event lines for ``n_pods`` pods in 64-pod jobs over 20 namespaces, spread over the nodes."""
    template = json.dumps({"type": event, "object": POD_TEMPLATE}, separators=_SEP)
    lines = []
    for i in range(n_pods):
        job = f"job-{i // 64:05d}"
        node = i % n_nodes
        z, b, r = node // 5000, node // 250, node // 25
        fields = {
            "@NAME@": f"{job}-{i % 64}-{i:06x}",
            "@JOB@": job,
            "@NS@": f"team-{(i // 64) % 20}",
            "@UID@": f"11111111-2222-4333-8444-{i:012d}",
            "@JOBUID@": f"99999999-2222-4333-8444-{i // 64:012d}",
            "@RV@": str(rv_base + i),
            "@IDX@": str(i % 64),
            "@CPU@": ("32", "16", "8", "4")[(i // 64) % 4],
            "@SUFFIX@": f"{i % 99991:05x}",
            "@NODE@": f"node-z{z}-b{b}-r{r}-h{node}",
            "@RACK@": f"z{z}-b{b}-r{r}",
            "@PHASE@": phase,
            "@HOSTIP@": f"10.1.{node // 256 % 256}.{node % 256}",
            "@PODIP@": f"10.{64 + i // 65536 % 64}.{i // 256 % 256}.{i % 256}",
            "@CID@": f"{i:064x}",
        }
        text = template
        for placeholder, value in fields.items():
            text = text.replace(placeholder, value)
        lines.append(text.encode())
    return lines


def node_event_lines(n_nodes: int) -> list[bytes]:
    return [json.dumps({"type": "ADDED", "object": node_dict(i)}, separators=_SEP).encode() for i in range(n_nodes)]
