"""Kubernetes manifests for a plan: a Deployment (one pod per vLLM replica) or, for a replica
that spans instances, a LeaderWorkerSet (leader + workers forming a Ray cluster, vLLM's
multi-node recipe), a ClusterIP Service, and the kubelet settings the node pool needs so that
the CPU Manager and Topology Manager pin each pod to its GPUs' NUMA node.

Pinning needs three things, all here: Guaranteed QoS (every container's requests equal its
limits, with an integral CPU count), a node pool whose kubelet runs ``cpuManagerPolicy:
static`` with a ``topologyManagerPolicy`` of ``single-numa-node`` (a replica whose GPUs share a
node) or ``restricted`` (one that must span nodes), and pods that land on the right instance
type (node affinity on the well-known ``node.kubernetes.io/instance-type`` label).

The API key is read from a Secret the user creates (``advisor-vllm-api-key``): nothing secret is
rendered. Pure: builds dicts, dumps YAML.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from advisor.catalog.schema import InstanceType
from advisor.core.layouts import Plan
from advisor.errors import UserInputError
from advisor.render.cloudinit import RenderRequest, check_value, offload_arg

IMAGE = "docker.io/vllm/vllm-openai"
SECRET = "advisor-vllm-api-key"
#: the Hugging Face token for gated repositories (key "token"), which the user creates
TOKEN_SECRET = "advisor-hf-token"
#: an unprivileged uid/gid for the server; HOME and every cache live on the cache volume
RUN_AS = 1000
CACHE = "/cache"
RAY_PORT = 6379
#: share of the node's vCPUs and memory the pods may take (the rest: kubelet, system, daemons)
NODE_SHARE = 0.9
#: CPUs the kubelet keeps for itself under the static CPU Manager (reservedSystemCPUs)
RESERVED_CPUS = 2


def topology_policy(inst: InstanceType, plan: Plan) -> tuple[str, str]:
    """(topologyManagerPolicy, why)."""
    if plan.alignment == "aligned" and plan.nodes == 1:
        return "single-numa-node", "every replica's GPUs share one NUMA node (catalog)"
    if plan.alignment == "spans-nodes":
        return "restricted", "a replica's GPUs span NUMA nodes (catalog)"
    if plan.tp * (1 if plan.nodes > 1 else plan.pp) < inst.gpu.count:
        return ("single-numa-node", "the catalog does not publish the NUMA map; a replica "
                "takes part of the GPUs, which one node usually holds")
    return ("restricted", "the catalog does not publish the NUMA map; a replica takes every GPU "
            "of the instance, which usually spans the sockets")


def _resources(inst: InstanceType, gpus: int, pods_per_node: int) -> dict[str, Any]:
    cpu = max(1, math.floor((inst.vcpus * NODE_SHARE - RESERVED_CPUS) / pods_per_node))
    mem_gib = max(4, math.floor((inst.memory_gib or 16 * gpus) * NODE_SHARE / pods_per_node))
    amount = {"cpu": str(cpu), "memory": f"{mem_gib}Gi", "nvidia.com/gpu": str(gpus)}
    # requests == limits with a whole number of CPUs: Guaranteed QoS, exclusive cores
    return {"requests": dict(amount), "limits": dict(amount)}


def _labels(name: str, role: str | None = None) -> dict[str, str]:
    out = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name,
           "app.kubernetes.io/managed-by": "advisor"}
    if role:
        out["advisor/role"] = role
    return out


def _pod_spec(inst: InstanceType, req: RenderRequest, container: dict[str, Any],
              shm_gib: int) -> dict[str, Any]:
    return {
        # the vllm-openai image runs as root unless told otherwise; nothing in serving needs it
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
                            "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "node.kubernetes.io/instance-type", "operator": "In",
                "values": [inst.name]}]}]}}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory",
                                                 "sizeLimit": f"{shm_gib}Gi"}},
                    {"name": "cache", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
    }


def _container(name: str, req: RenderRequest, command: list[str], resources: dict[str, Any],
               serving: bool, numa_bind: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": f"{IMAGE}:v{req.vllm_version}",
        "command": command,
        "resources": resources,
        # the root file system stays read-only: everything vLLM, the Hub client, Triton,
        # torch.compile and Ray write goes to the cache and tmp volumes (HOME points there)
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"],
                                             # vLLM's --numa-bind sets each worker's CPU and
                                             # memory policy itself
                                             **({"add": ["SYS_NICE"]} if numa_bind else {})}},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"},
                         {"name": "cache", "mountPath": CACHE},
                         {"name": "tmp", "mountPath": "/tmp"}],
        "env": [{"name": "CUDA_DEVICE_ORDER", "value": "PCI_BUS_ID"},
                {"name": "HOME", "value": CACHE},
                {"name": "HF_HOME", "value": f"{CACHE}/huggingface"},
                {"name": "XDG_CACHE_HOME", "value": f"{CACHE}/xdg"}],
    }
    if req.hf_token_ref is not None:  # a gated repository: the token comes from a Secret
        c["env"].append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": TOKEN_SECRET, "key": "token"}}})
    if serving:
        c["env"].append({"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {
            "name": SECRET, "key": "api-key"}}})
        c["ports"] = [{"name": "http", "containerPort": req.port}]
        probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
        c["startupProbe"] = {**probe, "failureThreshold": 180}
        c["readinessProbe"] = dict(probe)
        c["livenessProbe"] = {**probe, "failureThreshold": 6}
    return c


def _numa_bind(req: RenderRequest, plan: Plan) -> bool:
    """vLLM binds each worker itself where a replica spans nodes and the release can."""
    from advisor.core.engine import profile

    spans = any(r.alignment == "spans-nodes" for r in plan.replica_layout)
    return spans and profile(req.vllm_version).numa_bind_flag


def _serve(req: RenderRequest, plan: Plan) -> list[str]:
    args = ["vllm", "serve", req.model, "--host", "0.0.0.0", "--port", str(req.port),
            "--tensor-parallel-size", str(plan.tp), "--max-model-len", str(req.max_model_len),
            "--gpu-memory-utilization", f"{req.gpu_memory_utilization:g}"]
    if req.quantization:  # on-the-fly fp8 (advisor.core.weights); a checkpoint says its own
        args += ["--quantization", req.quantization]
    if req.kv_cache_dtype:  # the KV cache the ranking sized (recommend --kv-cache-dtype)
        args += ["--kv-cache-dtype", req.kv_cache_dtype]
    if offload := offload_arg(req.cpu_offload_gib):  # the offload the ranking sized
        args += ["--cpu-offload-gb", offload]
    if plan.expert_parallel:  # whole experts per GPU, where TP cannot split them
        args.append("--enable-expert-parallel")
    if _numa_bind(req, plan):
        args.append("--numa-bind")
    if plan.nodes > 1:
        args += ["--pipeline-parallel-size", str(plan.pp), "--distributed-executor-backend",
                 "ray"]
    return args


def manifests(inst: InstanceType, plan: Plan, req: RenderRequest,
              name: str) -> list[dict[str, Any]]:
    """The workload, its Service and the node pool's KubeletConfiguration, as dicts."""
    for kind in ("model", "vllm_version"):
        check_value(kind, getattr(req, kind))
    if plan.pp != 1 and plan.nodes == 1:
        raise UserInputError("pipeline parallelism inside one instance is not rendered for "
                             "Kubernetes", hint="pick a TP-only layout (--tp)")
    gpus = plan.tp
    shm = max(1, min(64, math.floor((inst.memory_gib or 64) * 0.1)))
    out: list[dict[str, Any]] = []
    if plan.nodes == 1:
        res = _resources(inst, gpus, plan.replicas)
        container = _container("vllm", req, _serve(req, plan), res, serving=True,
                               numa_bind=_numa_bind(req, plan))
        out.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": _labels(name)},
            "spec": {"replicas": plan.replicas,
                     "selector": {"matchLabels": _labels(name)},
                     "strategy": {"type": "Recreate"},
                     "template": {"metadata": {"labels": _labels(name)},
                                  "spec": _pod_spec(inst, req, container, shm)}}})
        selector = _labels(name)
    else:
        res = _resources(inst, gpus, 1)
        wait = ("for i in $(seq 1 360); do python3 -c 'import sys, ray; ray.init(address=\"auto\""
                ", logging_level=\"ERROR\"); sys.exit(0 if sum(n[\"Alive\"] for n in ray.nodes()) "
                ">= int(sys.argv[1]) else 1)' \"$LWS_GROUP_SIZE\" && break; sleep 5; done")
        leader_cmd = ["sh", "-c", f"ray start --head --port={RAY_PORT} --num-gpus={gpus} "
                      f"--disable-usage-stats && {wait} && exec "
                      + " ".join(_serve(req, plan))]
        worker_cmd = ["sh", "-c", f"exec ray start --block --address=$(LWS_LEADER_ADDRESS):"
                      f"{RAY_PORT} --num-gpus={gpus} --disable-usage-stats"]
        leader = _container("vllm-leader", req, leader_cmd, res, serving=True,
                            numa_bind=_numa_bind(req, plan))
        worker = _container("vllm-worker", req, worker_cmd, res, serving=False)
        out.append({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": _labels(name)},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": plan.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": _labels(name, "leader")},
                                   "spec": _pod_spec(inst, req, leader, shm)},
                "workerTemplate": {"metadata": {"labels": _labels(name, "worker")},
                                   "spec": _pod_spec(inst, req, worker, shm)}}}})
        selector = _labels(name, "leader")
    out.append({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": _labels(name)},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": [{"name": "http", "port": req.port, "targetPort": "http"}]}})
    policy, why = topology_policy(inst, plan)
    out.append({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static",
        "topologyManagerPolicy": policy,
        "topologyManagerScope": "pod",
        "reservedSystemCPUs": f"0-{RESERVED_CPUS - 1}",
        "_advisor_note": f"node pool of {inst.name}: {why}. Caveat: the Topology Manager "
        "aligns CPUs and memory only with GPUs handed out by a device plugin; GPUs allocated "
        "through DRA (resource claims) are not aligned (kubernetes/website#56232)",
    })
    return out


def files(inst: InstanceType, plan: Plan, req: RenderRequest, name: str) -> dict[str, str]:
    """``manifests.yaml`` (workload + Service, for kubectl apply) and ``kubelet-config.yaml``
    (for the node pool)."""
    docs = manifests(inst, plan, req, name)
    kubelet = [d for d in docs if d["kind"] == "KubeletConfiguration"]
    rest = [d for d in docs if d["kind"] != "KubeletConfiguration"]
    return {"manifests.yaml": dump(rest), "kubelet-config.yaml": dump(kubelet)}


def dump(docs: list[dict[str, Any]]) -> str:
    """Multi-document YAML; the kubelet settings' note becomes a comment above them."""
    parts = []
    for d in docs:
        d = dict(d)
        note = d.pop("_advisor_note", None)
        head = (f"# Apply to the node pool's kubelet (not to the cluster): {note}\n"
                if note else "")
        parts.append(head + yaml.safe_dump(d, sort_keys=False, width=1000))
    return "---\n" + "---\n".join(parts)
