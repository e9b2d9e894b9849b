#!/usr/bin/env bash
# advisor: start one vLLM replica bound to the NUMA node of its GPUs.
#
# Reads its settings from the environment (systemd's EnvironmentFile, one per replica):
#   ADVISOR_GPUS            this replica's GPU indices, e.g. 0,1,2,3
#   ADVISOR_ALL_GPUS        every replica's GPUs, ';'-separated, e.g. 0,1,2,3;4,5,6,7
#   ADVISOR_MODEL ADVISOR_PORT ADVISOR_TP ADVISOR_MAX_MODEL_LEN ADVISOR_GPU_MEM_UTIL
#   ADVISOR_HOST            address to listen on (default 127.0.0.1)
#   ADVISOR_API_KEY_REF     where the API key lives: aws-ssm:NAME, gcp-secret:NAME,
#                           azure-kv:VAULT/NAME or file:PATH (never the key itself); an empty
#                           or unreadable key stops the replica instead of serving openly
#   ADVISOR_HF_TOKEN_REF    where the Hugging Face token lives (same forms), for gated models
#   ADVISOR_VENV            the virtual environment holding vLLM (default /opt/advisor/venv)
#   ADVISOR_SYSFS_ROOT      prefix for /sys (tests use a fake tree)
#   ADVISOR_BUS_IDS         GPU PCI bus ids in index order, instead of asking nvidia-smi
#   ADVISOR_VLLM_NUMA_BIND=1  the pinned vLLM has --numa-bind (PR #38635): a replica whose GPUs
#                           span nodes lets vLLM bind each worker to its own GPU's node
#   ADVISOR_QUANTIZATION    vLLM's --quantization (fp8: on-the-fly fp8 weights); unset: the
#                           checkpoint's own (a published fp8 checkpoint says so itself)
#   ADVISOR_KV_CACHE_DTYPE  vLLM's --kv-cache-dtype (fp8, fp8_e4m3, fp8_e5m2: the KV cache the
#                           plan was sized for); unset: vLLM's default
#   ADVISOR_CPU_OFFLOAD_GB  vLLM's --cpu-offload-gb (GiB of weights per GPU in host memory)
#   ADVISOR_EXPERT_PARALLEL=1  vLLM's --enable-expert-parallel (whole experts per GPU)
#   ADVISOR_DRY_RUN=1       print the command line instead of running it
#   ADVISOR_ROLE            single (default), or head / worker of a multi-node replica: the
#                           workers join the head's Ray cluster (ray start --address), the head
#                           starts Ray, waits for ADVISOR_NODES nodes and runs vllm serve with
#                           --pipeline-parallel-size ADVISOR_PP over Ray (vLLM's multi-node
#                           recipe); every node is NUMA-bound the same way
#   ADVISOR_RAY_HEAD        the head's address, for a worker (else read from /etc/advisor/ray-head)
#   ADVISOR_RAY_PORT        Ray's port on the head (default 6379)
#
# Binding: numactl --cpunodebind/--membind to the GPUs' node, read from sysfs at boot (the
# catalog can be wrong; the machine is not). numactl rather than systemd's NUMAPolicy= and
# CPUAffinity= because the node is only known at boot, after the unit file is written.
# A replica whose GPUs sit on several nodes is handed to vLLM's own --numa-bind where the
# pinned release has it, else gets its CPUs on those nodes and memory interleaved across them. A GPU whose numa_node reads -1 (hidden) leaves the replica unbound,
# with a warning in the journal.
set -euo pipefail

log() { printf 'advisor-launch: %s\n' "$*" >&2; }

: "${ADVISOR_GPUS:?}" "${ADVISOR_MODEL:?}" "${ADVISOR_PORT:?}" "${ADVISOR_TP:?}"
: "${ADVISOR_MAX_MODEL_LEN:?}" "${ADVISOR_GPU_MEM_UTIL:?}"
sysfs="${ADVISOR_SYSFS_ROOT:-}"
venv="${ADVISOR_VENV:-/opt/advisor/venv}"
host="${ADVISOR_HOST:-127.0.0.1}"
all_gpus="${ADVISOR_ALL_GPUS:-$ADVISOR_GPUS}"
dry_run="${ADVISOR_DRY_RUN:-0}"

bus_ids=()
if [[ -n "${ADVISOR_BUS_IDS:-}" ]]; then
  IFS=',' read -r -a bus_ids <<<"$ADVISOR_BUS_IDS"
else
  mapfile -t bus_ids < <(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader)
fi

# nvidia-smi prints 00000000:18:00.0; sysfs names it 0000:18:00.0
node_of_gpu() {
  local id="${bus_ids[$1]:-}" bdf node
  id="${id,,}"
  bdf="${id: -12}"
  node="$(cat "$sysfs/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null || echo -1)"
  printf '%s\n' "$node"
}

IFS=',' read -r -a gpus <<<"$ADVISOR_GPUS"
nodes=()
hidden=0
for g in "${gpus[@]}"; do
  n="$(node_of_gpu "$g")"
  if [[ ! "$n" =~ ^[0-9]+$ ]]; then
    hidden=1
    log "GPU $g: numa_node is $n (hidden by the host); running unbound"
  elif [[ ! " ${nodes[*]} " =~ \ $n\  ]]; then
    nodes+=("$n")
  fi
done

# OpenMP threads: the node's CPUs shared by the replicas whose GPUs sit on it
cpus_of_node() {
  local list count=0 part lo hi
  list="$(cat "$sysfs/sys/devices/system/node/node$1/cpulist" 2>/dev/null || true)"
  IFS=',' read -r -a parts <<<"$list"
  for part in "${parts[@]}"; do
    if [[ "$part" == *-* ]]; then lo="${part%-*}"; hi="${part#*-}"; count=$((count + hi - lo + 1))
    elif [[ -n "$part" ]]; then count=$((count + 1)); fi
  done
  printf '%s\n' "$count"
}

numa=()
extra=()
case "${ADVISOR_QUANTIZATION:-}" in
  "") ;;
  fp8) extra+=(--quantization fp8) ;;
  *) log "ADVISOR_QUANTIZATION must be fp8 or unset, not ${ADVISOR_QUANTIZATION:0:40}"; exit 1 ;;
esac
case "${ADVISOR_KV_CACHE_DTYPE:-}" in
  "") ;;
  fp8 | fp8_e4m3 | fp8_e5m2) extra+=(--kv-cache-dtype "$ADVISOR_KV_CACHE_DTYPE") ;;
  *) log "ADVISOR_KV_CACHE_DTYPE must be fp8, fp8_e4m3, fp8_e5m2 or unset, not ${ADVISOR_KV_CACHE_DTYPE:0:40}"; exit 1 ;;
esac
offload="${ADVISOR_CPU_OFFLOAD_GB:-}"
if [[ -n "$offload" ]]; then
  [[ "$offload" =~ ^[0-9]{1,4}(\.[0-9]{1,3})?$ ]] \
    || { log "ADVISOR_CPU_OFFLOAD_GB must be a number of GiB, not ${offload:0:40}"; exit 1; }
  extra+=(--cpu-offload-gb "$offload")
fi
case "${ADVISOR_EXPERT_PARALLEL:-0}" in
  0) ;;
  1) extra+=(--enable-expert-parallel) ;;
  *) log "ADVISOR_EXPERT_PARALLEL must be 0 or 1, not ${ADVISOR_EXPERT_PARALLEL:0:40}"; exit 1 ;;
esac
threads=""
if [[ "$hidden" == 0 && "${#nodes[@]}" -ge 1 ]]; then
  joined="$(IFS=','; printf '%s' "${nodes[*]}")"
  if [[ "${#nodes[@]}" -eq 1 ]]; then
    numa=(numactl "--cpunodebind=$joined" "--membind=$joined")
  elif [[ "${ADVISOR_VLLM_NUMA_BIND:-0}" == 1 ]]; then
    log "replica GPUs ${ADVISOR_GPUS} span NUMA nodes $joined: vLLM --numa-bind binds each worker"
    extra+=(--numa-bind)
  else
    log "replica GPUs ${ADVISOR_GPUS} span NUMA nodes $joined: memory interleaved across them"
    numa=(numactl "--cpunodebind=$joined" "--interleave=$joined")
  fi
  sharing=0
  IFS=';' read -r -a replicas <<<"$all_gpus"
  for r in "${replicas[@]}"; do
    first="${r%%,*}"
    if [[ -n "$first" && " ${nodes[*]} " =~ \ $(node_of_gpu "$first")\  ]]; then
      sharing=$((sharing + 1))
    fi
  done
  total=0
  for n in "${nodes[@]}"; do total=$((total + $(cpus_of_node "$n"))); done
  if [[ "$sharing" -ge 1 && "$total" -ge "$sharing" ]]; then threads=$((total / sharing)); fi
fi

key_ref="${ADVISOR_API_KEY_REF:-}"
token_ref="${ADVISOR_HF_TOKEN_REF:-}"
# Each secret store is read the way its instance can without extra tools; the store of the
# instance's cloud comes from that cloud's folder (src/advisor/clouds/<cloud>/secret_fetch.sh),
# put in at the line below when advisor renders for the cloud: a fetch_cloud_secret function
# and what it needs. A launcher rendered for a host you have (or this template as it is) reads
# file: references only.
# json_field: the string at a dotted path of the JSON on stdin, for the readers that get JSON
# from a metadata server or a store's REST API (python3 is on every image)
json_field() {
  python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
sys.stdout.write(v)' "$1"
}
# @advisor-cloud-secret-fetch@
fetch_secret() {
  local ref="$1"
  case "$ref" in
    file:*)
      if [[ ! -f "${ref#file:}" ]]; then
        log "${ref#file:} is not a regular file"
        return 1
      fi
      head -c 4096 -- "${ref#file:}" ;;
    *)
      if declare -F fetch_cloud_secret >/dev/null; then
        fetch_cloud_secret "$ref"
      else
        log "secret reference '$ref' names no secret store this launcher reads (file: only)"
        return 1
      fi ;;
  esac
}
# An empty, blank or None/null secret stops the replica: vLLM only checks it is non-empty.
read_secret() {
  local what="$1" ref="$2" value
  if ! value="$(fetch_secret "$ref")"; then
    log "$what: could not read $ref; not starting"
    exit 1
  fi
  value="${value%$'\n'}"
  if [[ -z "${value//[[:space:]]/}" ]]; then
    log "$what from $ref is empty or blank; refusing to start without it"
    exit 1
  fi
  case "${value,,}" in
    none | null | undefined)
      log "$what from $ref reads '$value', not a key; refusing to start without one"
      exit 1 ;;
  esac
  printf '%s' "$value"
}

role="${ADVISOR_ROLE:-single}"
ray_port="${ADVISOR_RAY_PORT:-6379}"
ngpus="${#gpus[@]}"
ray_head=()
case "$role" in
  single)
    cmd=("${numa[@]}" "$venv/bin/vllm" serve "$ADVISOR_MODEL" --host "$host"
         --port "$ADVISOR_PORT" --tensor-parallel-size "$ADVISOR_TP"
         --max-model-len "$ADVISOR_MAX_MODEL_LEN" --gpu-memory-utilization "$ADVISOR_GPU_MEM_UTIL"
         "${extra[@]}") ;;
  head)
    : "${ADVISOR_PP:?}" "${ADVISOR_NODES:?}"
    ray_head=("${numa[@]}" "$venv/bin/ray" start --head --port "$ray_port" --num-gpus "$ngpus"
              --disable-usage-stats)
    cmd=("${numa[@]}" "$venv/bin/vllm" serve "$ADVISOR_MODEL" --host "$host"
         --port "$ADVISOR_PORT" --tensor-parallel-size "$ADVISOR_TP"
         --pipeline-parallel-size "$ADVISOR_PP" --distributed-executor-backend ray
         --max-model-len "$ADVISOR_MAX_MODEL_LEN" --gpu-memory-utilization "$ADVISOR_GPU_MEM_UTIL"
         "${extra[@]}") ;;
  worker)
    head_addr="${ADVISOR_RAY_HEAD:-}"
    if [[ -z "$head_addr" && -r /etc/advisor/ray-head ]]; then
      head_addr="$(tr -d '[:space:]' </etc/advisor/ray-head)"
    fi
    if [[ ! "$head_addr" =~ ^[0-9A-Za-z.:-]+$ ]]; then
      log "worker: no Ray head address (ADVISOR_RAY_HEAD or /etc/advisor/ray-head)"
      exit 1
    fi
    cmd=("${numa[@]}" "$venv/bin/ray" start --block --address "$head_addr:$ray_port"
         --num-gpus "$ngpus" --disable-usage-stats) ;;
  *) log "ADVISOR_ROLE must be single, head or worker, not $role"; exit 1 ;;
esac

if [[ "$dry_run" == 1 ]]; then
  if [[ "${#ray_head[@]}" -gt 0 ]]; then
    printf 'RAY:'
    printf ' %q' "${ray_head[@]}"
    printf '\n'
  fi
  if [[ "$role" == worker ]]; then
    printf 'CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=%q OMP_NUM_THREADS=%q' \
      "$ADVISOR_GPUS" "${threads:-unset}"
  else
    printf 'CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=%q OMP_NUM_THREADS=%q VLLM_API_KEY=<from %q>' \
      "$ADVISOR_GPUS" "${threads:-unset}" "${key_ref:-nowhere}"
  fi
  if [[ -n "$token_ref" ]]; then printf ' HF_TOKEN=<from %q>' "$token_ref"; fi
  printf ' %q' "${cmd[@]}"
  printf '\n'
  exit 0
fi

# indices are nvidia-smi's (PCI bus order); CUDA's default order is fastest-first
export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$ADVISOR_GPUS"
if [[ -n "$token_ref" ]]; then  # a gated repository: the Hub wants a token to download
  HF_TOKEN="$(read_secret "the Hugging Face token" "$token_ref")"
  export HF_TOKEN
fi
if [[ -n "$threads" ]]; then export OMP_NUM_THREADS="$threads"; fi
if [[ "$role" == worker ]]; then
  exec "${cmd[@]}"
fi
if [[ -z "$key_ref" ]]; then
  log "ADVISOR_API_KEY_REF is not set; refusing to serve without an API key"
  exit 1
fi
VLLM_API_KEY="$(read_secret "the API key" "$key_ref")"
export VLLM_API_KEY
if [[ "$role" == head ]]; then
  "${ray_head[@]}"
  # vLLM places the pipeline stages on the cluster's GPUs: wait until every node has joined
  for _ in $(seq 1 360); do
    if "$venv/bin/python" -c 'import sys, ray
ray.init(address="auto", logging_level="ERROR")
sys.exit(0 if sum(1 for n in ray.nodes() if n["Alive"]) >= int(sys.argv[1]) else 1)' \
         "$ADVISOR_NODES" 2>/dev/null; then
      break
    fi
    sleep 5
  done
fi
exec "${cmd[@]}"
