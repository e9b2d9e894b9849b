#!/usr/bin/env bash
# advisor: the instance's first-boot install, run once by cloud-init (runcmd) as root:
#   advisor-install.sh PYTHON UNIT...
# PYTHON is the major.minor the lock (/opt/advisor/requirements.lock) was resolved for; UNIT the
# replicas' units. It runs named steps, each logged to /var/log/advisor-install.log, and tells
# the console before each one (vllm-report.sh). The first step that fails stops the install
# with that step's exit code, after a `failed` event naming the step and its last log line,
# so that cloud-init reports the run failed (cloud-init status: error) and `advisor status`
# says why. It never reads a secret: the replicas fetch theirs at each start.
set -uo pipefail

py_want="${1:?usage: advisor-install.sh PYTHON UNIT...}"
shift
units=("$@")
bin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${ADVISOR_VENV:-/opt/advisor/venv}"
lock="${ADVISOR_LOCK:-/opt/advisor/requirements.lock}"
log="${ADVISOR_INSTALL_LOG:-/var/log/advisor-install.log}"
env_dir="${ADVISOR_ENV_DIR:-/etc/advisor}"
service_user=vllm

report() { "$bin_dir/vllm-report.sh" install "$@" || true; }

# step NAME COMMAND...: run it with its output in the log; the install ends at its failure
step() {
  local name="$1" code start tail
  shift
  report running "$name"
  printf '== %s: %s\n' "$name" "$*" >>"$log"
  start="$(stat -c %s "$log")"
  "$@" >>"$log" 2>&1
  code=$?
  if [[ "$code" -ne 0 ]]; then
    tail="$(tail -c +"$((start + 1))" "$log" | grep -v '^[[:space:]]*$' | tail -n 1)"
    report failed "$name" "$code" "${tail:-no output; see $log}"
    printf 'advisor-install: %s failed (exit %s); see %s\n' "$name" "$code" "$log" >&2
    exit "$code"
  fi
}

check_python() {
  local have
  have="$(python3 --version 2>&1)" || { printf '%s\n' "$have"; return 1; }
  have="${have#Python }"
  have="$(cut -d. -f1-2 <<<"$have")"
  if [[ "$have" != "$py_want" ]]; then
    printf 'python3 is %s but the lock is for Python %s: render for this image with python=%s\n' \
      "$have" "$py_want" "$have"
    return 1
  fi
}

start_replicas() {
  systemctl enable "${units[@]}" || return
  # all replicas start at once and this install does not wait for them: each unit's
  # ExecStartPost waits for its own /health, and its reporter tells the console
  systemctl start --no-block "${units[@]}"
}

umask 022
mkdir -p "$(dirname "$log")"
step "check python" check_python
step "create venv" python3 -m venv "$venv"
# pip unpacks each wheel under TMPDIR (torch's is 888 MB): a tmpfs /tmp (systemd-nspawn, hardened
# images) fills up, seen in the boot harness as "[Errno 28] No space left on device"
step "install vllm" env TMPDIR=/var/tmp "$venv/bin/pip" install --no-cache-dir --require-hashes \
  --no-deps -r "$lock"
step "permissions" chown -R "root:$service_user" "$env_dir"
step "reload systemd" systemctl daemon-reload
step "start replicas" start_replicas
report "done" install
