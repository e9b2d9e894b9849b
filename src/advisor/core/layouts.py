"""Layouts of a model on one instance: TP, PP, replicas, and where each replica sits. Pure.

Every TP size that divides the attention heads and the GPU count is a candidate; PP is added
only when one TP group of all the GPUs is the only way (the caller decides by fitting). Each
replica takes consecutive GPUs; it is NUMA-aligned when the catalog puts all of them on one
node, spans nodes when it puts two of them on different nodes (even if the node of another is not
known), and unknown otherwise when the catalog does not say.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import InstanceType
from advisor.core.model import ModelSpec

Alignment = Literal["aligned", "spans-nodes", "unknown"]


class Replica(BaseModel):
    model_config = ConfigDict(frozen=True)
    gpus: list[int]
    numa_nodes: list[int] | None
    alignment: Alignment
    vcpus: int
    #: the replica's share of host memory bandwidth, GB/s (None: the catalog does not know)
    host_memory_bandwidth_gb_s: float | None


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True)
    tp: int
    pp: int
    #: replicas per instance (1 for a replica spanning several instances)
    replicas: int
    replica_layout: list[Replica]
    #: instances one replica spans: TP inside each, PP across them (vLLM's multi-node recipe)
    nodes: int = 1
    #: served with --enable-expert-parallel: whole experts on each GPU of the TP group, where
    #: TP cannot split them (:meth:`ModelSpec.expert_parallel_at`)
    expert_parallel: bool = False

    @property
    def alignment(self) -> Alignment:
        kinds = {r.alignment for r in self.replica_layout}
        if "spans-nodes" in kinds:
            return "spans-nodes"
        return "unknown" if "unknown" in kinds else "aligned"


def tp_sizes(spec: ModelSpec, gpus: int, expert_parallel: bool | None = None) -> list[int]:
    """The TP sizes vLLM can serve ``spec`` at on ``gpus`` GPUs: powers of two dividing them
    that TP can shard, or that expert parallelism can where TP cannot split the experts
    (``expert_parallel``: the user's choice, :meth:`ModelSpec.expert_parallel_for`)."""
    return [t for t in range(1, gpus + 1)
            if gpus % t == 0 and t & (t - 1) == 0
            and spec.expert_parallel_for(t, expert_parallel) is not None]


def layouts(spec: ModelSpec, inst: InstanceType, catalog: Catalog,
            with_pp: bool = False, expert_parallel: bool | None = None) -> list[Plan]:
    """Every TP x PP x replicas layout of ``spec`` on ``inst`` (PP only with ``with_pp``;
    ``expert_parallel``: the user's choice, :meth:`ModelSpec.expert_parallel_for`)."""
    n = inst.gpu.count
    out = []
    for tp in tp_sizes(spec, n, expert_parallel):
        pps = [1]
        if with_pp and tp * 2 <= n:
            pps += [p for p in (2, 4, 8) if tp * p <= n and n % (tp * p) == 0
                    and p <= spec.num_layers]
        for pp in pps:
            out.append(place(inst, catalog, tp, pp,
                             bool(spec.expert_parallel_for(tp, expert_parallel))))
    return out


def place(inst: InstanceType, catalog: Catalog, tp: int, pp: int,
          expert_parallel: bool = False) -> Plan:
    n = inst.gpu.count
    size = tp * pp
    replicas = n // size
    nodes = inst.numa.gpu_nodes
    cpu = catalog.cpus.get(inst.cpu.model) if inst.cpu.model else None
    sockets = inst.cpu.sockets or (1 if n == 1 else None)
    bw_total = (cpu.memory_bandwidth_gb_s_per_socket * sockets
                if cpu and cpu.memory_bandwidth_gb_s_per_socket and sockets else None)
    layout = []
    for r in range(replicas):
        gpus = list(range(r * size, (r + 1) * size))
        rn: list[int] | None
        align: Alignment
        known = sorted({node for g in gpus if (node := nodes[g]) is not None}) \
            if nodes is not None else []
        if len(known) > 1:  # GPUs on two nodes already: it spans, whatever the unknown ones say
            rn, align = known, "spans-nodes"
        elif nodes is None or any(nodes[g] is None for g in gpus):
            rn, align = None, "unknown"
        else:
            rn, align = known, "aligned"
        layout.append(Replica(gpus=gpus, numa_nodes=rn, alignment=align,
                              vcpus=inst.vcpus // replicas,
                              host_memory_bandwidth_gb_s=round(bw_total / replicas, 1)
                              if bw_total else None))
    return Plan(tp=tp, pp=pp, replicas=replicas, replica_layout=layout,
                expert_parallel=expert_parallel)


def place_multi(inst: InstanceType, catalog: Catalog, tp: int, nodes: int,
                expert_parallel: bool = False) -> Plan:
    """One replica over ``nodes`` identical instances: TP ``tp`` inside each (all its GPUs,
    placed as on one instance), PP ``nodes`` across them — vLLM's multi-node recipe."""
    one = place(inst, catalog, tp, 1)
    head = one.replica_layout[0].model_copy(update={"vcpus": inst.vcpus})
    return Plan(tp=tp, pp=nodes, replicas=1, replica_layout=[head], nodes=nodes,
                expert_parallel=expert_parallel)
