#!/usr/bin/env bash
# advisor: wait until this replica's vLLM answers /health (ExecStartPost of vllm@.service).
set -euo pipefail
# a multi-node worker serves no HTTP: it is healthy once its Ray worker runs (systemd watches it)
if [[ "${ADVISOR_ROLE:-single}" == worker ]]; then exit 0; fi
: "${ADVISOR_PORT:?}"
host="${ADVISOR_HOST:-127.0.0.1}"
[[ "$host" == "0.0.0.0" ]] && host=127.0.0.1
# systemd gives ExecStartPost the main process's PID: a vLLM that exits while loading is
# reported at once, not after TimeoutStartSec
main="${MAINPID:-}"
for _ in $(seq 1 "${ADVISOR_HEALTH_TRIES:-900}"); do
  if [[ -n "$main" ]] && ! kill -0 "$main" 2>/dev/null; then
    printf 'advisor-health: vLLM (pid %s) exited before /health answered\n' "$main" >&2
    exit 1
  fi
  if curl -fsS --max-time 5 "http://$host:$ADVISOR_PORT/health" >/dev/null 2>&1; then
    exit 0
  fi
  sleep 2
done
printf 'advisor-health: vLLM on port %s did not become healthy\n' "$ADVISOR_PORT" >&2
exit 1
