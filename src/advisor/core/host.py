"""The host side of a plan, as gates and weights that come from public measurements. Pure.

Three things about the machine around the GPUs change what vLLM does, and each enters the
ranking in one stated way:

* **The CPU floor** (a gate). vLLM's GPU serving runs an API server, an engine core and one
  worker process per GPU, each busy-polling a core; its docs ask for at least 2 + N physical
  cores for N GPUs (:data:`CPU_FLOOR_SOURCE`). Public reports of vLLM short of CPU measure
  2-12x slower decode (:data:`EVIDENCE`). An instance under the floor is rejected, or kept
  with a risk under ``--allow-small-host``.
* **NUMA placement** (a weight, by regime). Public measurements are bimodal (:data:`EVIDENCE`):
  when nothing of the host is on the decode's hot path — one GPU, or TP over NVLink/PCIe inside
  one instance with weights and KV cache in HBM — a process on the far node costs 0-2%; when the
  host *is* on the hot path — weights streamed from host memory (``--cpu-offload-gb``), KV
  transfers over RDMA/NIXL, several NUMA domains per socket — 1.5x-5x (30x per batch in one
  disaggregated case). A replica spanning instances (PP over the NIC) is counted host-heavy by
  analogy with the RDMA cases: no public measurement of NUMA on vLLM's multi-node PP was found.
  :func:`regime` says which applies to a plan, and :data:`NUMA_WEIGHT` holds the
  weight of each placement in each regime: the low end of the measured range, so an unknown
  map on a host-heavy plan is charged the smallest slowdown anyone measured, and an in-node plan
  is charged nothing it cannot be shown to lose.
* **Host memory bandwidth per GPU and CPU generation** carry **no weight**. No public
  measurement ties host bandwidth to vLLM's speed with the host off the hot path; CPU speed
  does matter (vllm#8147: 3.8x from a 2019 server Xeon to a 2021 desktop i9, on vLLM 0.5.5),
  but nothing measures it between the server generations clouds sell on a current vLLM. Both
  are shown, and an old generation is a risk; with ``--cpu-offload-gb`` the host link's
  bandwidth enters the performance estimate itself (:func:`advisor.core.perf.offload_s`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.catalog.schema import InstanceType

Regime = Literal["gpu-bound", "host-heavy"]

#: where the CPU floor comes from
CPU_FLOOR_SOURCE = ("vLLM docs, 'CPU Resources for GPU Deployments': \"The minimum is 2 + N "
                    "physical cores (1 for the API server, 1 for the engine core, and 1 per GPU "
                    "worker)\"; with hyperthreading 2 x (2 + N) vCPUs "
                    "(https://docs.vllm.ai/en/latest/configuration/optimization/)")

#: (source, regime, what was measured) — the evidence behind the floor and the weights; the
#: README prints the same table. Regimes: gpu-bound (nothing of the host on the decode's hot
#: path), host-heavy (weights or KV over the host path, RDMA/NIXL transfers, many NUMA domains),
#: cpu-floor (vLLM's processes short of cores).
EVIDENCE: tuple[tuple[str, str, str], ...] = (
    ("https://github.com/vllm-project/vllm/pull/30492", "gpu-bound",
     "4 x GB200, DeepSeek-R1 FP4 TP4 in the node, latency bench: NUMA binding -2%..+1% "
     "(4.73 s unbound, 4.77 / 4.64 s bound), i.e. noise"),
    ("https://github.com/1CatAI/1Cat-vLLM/issues/678", "gpu-bound",
     "2 x Xeon Gold 6148, 4 x V100 SXM2 NVLink, TP4: per-rank NUMA binding, decode +1.9%"),
    ("https://github.com/vllm-project/vllm/pull/30492", "host-heavy",
     "same PR, Qwen3-4B DP2 with --cpu-offload-gb 4: the right binding ~1.5x faster than "
     "every other setting (H2D bandwidth on the hot path)"),
    ("https://github.com/mpicbg-scicomp/gearshifft/pull/82", "host-heavy",
     "P100 PCIe on a 2-socket host: pinned host-to-device copy 12.2 GB/s from the GPU's socket, "
     "3.8 GB/s from the far one (3.2x), the path weight offload takes"),
    ("https://github.com/NVIDIA/srt-slurm/pull/332", "host-heavy",
     "B300 node, EPYC 9575F with 8 NUMA domains, disaggregated decode: p50 70.4 ms unbound vs "
     "14.1 ms bound (5.0x)"),
    ("https://github.com/ai-dynamo/dynamo/issues/10171", "host-heavy",
     "a3-highgpu-8g (8 x H100, 2 PCI roots), disaggregated prefill/decode over NIXL: both "
     "prefill replicas on one root ~50% less throughput, ~30x per-batch latency"),
    ("https://docs.vllm.ai/en/latest/configuration/optimization/", "cpu-floor",
     "2 + N physical cores for N GPUs; fewer \"will cause contention and significantly degrade "
     "throughput and latency\" (guidance, no figure)"),
    ("https://github.com/vllm-project/vllm/issues/49460", "cpu-floor",
     "6-core CPU limit on an 8-GPU host (structured output): inter-token latency 7-9 ms -> "
     "68-93 ms (8-12x), GPU 7-12% busy"),
    ("https://github.com/vllm-project/vllm/issues/8147", "cpu-floor",
     "same RTX 3090, Xeon Gold 6240 -> i9-12900K (vLLM 0.5.5): 3.8x faster, latency 300 -> "
     "100 ms: the host CPU's speed is on vLLM's hot path"),
    ("https://github.com/vllm-project/vllm/issues/49013", "cpu-floor",
     "host-side work added to each step (a pinned buffer per step): 1.9-2.0x slower drains on "
     "an A100 (a code regression, not a core count: the size of host-bound loss)"),
)

#: score weight of a placement in each regime (score = the question's figure x (1 + weight)).
#: gpu-bound: the measured 0-2% — nothing for a map that is merely not published, the upper 2%
#: for a replica known to span nodes (no public vLLM measurement of PCIe TP split across
#: sockets was found; P2P bandwidth drops 9-31% there, small next to NCCL's per-all-reduce
#: latency). host-heavy: the lowest measured slowdown, 1.5x (PR 30492 with offload), for any
#: placement not known to be aligned; several NUMA domains measured up to 5x.
NUMA_WEIGHT: dict[Regime, dict[str, float]] = {
    "gpu-bound": {"aligned": 0.0, "unknown": 0.0, "spans-nodes": 0.02},
    "host-heavy": {"aligned": 0.0, "unknown": 0.5, "spans-nodes": 0.5},
}


def numa_weight(kind: Regime, alignment: str, nodes: int) -> float:
    """The score weight of a plan: :data:`NUMA_WEIGHT` of its regime and placement.

    A replica over several instances has its GPUs on several hosts' NUMA nodes, so it is charged
    at least what a replica spanning the NUMA nodes of one host is charged in the gpu-bound
    regime: the network between its slices is farther than the link between two sockets, and
    without this floor two 4-GPU instances on a Ray cluster out-ranked one 8-GPU instance of
    the same $/h (Kimi-K2.5 on AWS g7e: 2 x g7e.24xlarge TP 4 x PP 2 ahead of g7e.48xlarge
    TP 8, by the single instance's 2% span weight alone). At an equal score the ranking then
    puts fewer instances per replica first (:func:`advisor.core.ranking.rank`).
    """
    weight = NUMA_WEIGHT[kind][alignment]
    if nodes > 1:
        weight = max(weight, NUMA_WEIGHT["gpu-bound"]["spans-nodes"])
    return weight


class HostView(BaseModel):
    """The host facts a recommendation rests on, and the regime and weight it was scored in."""

    model_config = ConfigDict(frozen=True)
    vcpus: int
    physical_cores: int
    #: vLLM's floor for this instance's GPUs: 2 + N physical cores
    cpu_floor_cores: int
    meets_cpu_floor: bool
    memory_bandwidth_gb_s_per_gpu: float | None
    regime: Regime
    #: why the regime applies, in words
    regime_why: str
    numa_weight: float


def physical_cores(inst: InstanceType) -> int:
    """Physical cores behind the VM's vCPUs: x86 GPU VMs on AWS, GCP and Azure expose both SMT
    threads of each core as vCPUs (2 vCPUs a core) unless the catalog says SMT is off."""
    if inst.host.smt_siblings_exposed is False:
        return inst.vcpus
    return max(1, inst.vcpus // 2)


def cpu_floor(gpus: int) -> int:
    """vLLM's floor: 2 + N physical cores for N GPUs (:data:`CPU_FLOOR_SOURCE`)."""
    return 2 + gpus


def floor_shortfall(inst: InstanceType) -> str | None:
    """Why the instance is below vLLM's CPU floor, or None when it meets it."""
    cores, need = physical_cores(inst), cpu_floor(inst.gpu.count)
    if cores >= need:
        return None
    return (f"{inst.vcpus} vCPUs = {cores} physical cores for {inst.gpu.count} GPU(s): below "
            f"vLLM's floor of 2 + N = {need} physical cores ({2 * need} vCPUs with SMT); "
            "CPU-starved vLLM decodes 2-12x slower in public reports")


def regime(inst: InstanceType, nodes: int, cpu_offload_gib: float) -> tuple[Regime, str]:
    """Which evidence regime a plan falls in, and why."""
    if cpu_offload_gib > 0:
        return "host-heavy", (f"--cpu-offload-gb {cpu_offload_gib:g}: weights stream from host "
                              "memory in every forward pass")
    if nodes > 1:
        return "host-heavy", (f"one replica over {nodes} instances: activations cross the NIC "
                              "(RDMA) every step")
    nps = inst.host.numa_domains_per_socket
    if nps is not None and nps > 1:
        return "host-heavy", f"{nps} NUMA domains per socket"
    return "gpu-bound", ("weights and KV cache stay in GPU memory and TP runs inside the "
                         "instance: the host is off the decode's hot path")


def view(inst: InstanceType, nodes: int, cpu_offload_gib: float, alignment: str,
         host_bw_per_gpu: float | None) -> HostView:
    kind, why = regime(inst, nodes, cpu_offload_gib)
    cores = physical_cores(inst)
    return HostView(vcpus=inst.vcpus, physical_cores=cores,
                    cpu_floor_cores=cpu_floor(inst.gpu.count),
                    meets_cpu_floor=cores >= cpu_floor(inst.gpu.count),
                    memory_bandwidth_gb_s_per_gpu=(round(host_bw_per_gpu, 1)
                                                   if host_bw_per_gpu else None),
                    regime=kind, regime_why=why,
                    numa_weight=numa_weight(kind, alignment, nodes))
