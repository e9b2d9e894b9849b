#!/usr/bin/env bash
# advisor: tell the instance's owner how its first boot goes, without logging in. Each event is
# one line on the serial console (which every cloud lets its owner read), on stdout (the
# journal, or cloud-init's output log), and is kept in /var/lib/advisor/boot-status.json:
#   advisor-boot: {"v":1,"step":"install vllm","state":"failed","exit":1,"t":...,"tail":"..."}
# advisor.bootstatus parses these lines (its docstring is the format). Runs as root:
#   vllm-report.sh serving N   ExecStartPost=+ of vllm@N.service, once /health answered
#   vllm-report.sh stopped N   ExecStopPost=+ of vllm@N.service: an `exited` event with the exit
#                              code and the unit's last journal line, unless it was stopped on
#                              request ($SERVICE_RESULT=success); each restart is reported again
#   vllm-report.sh install STATE STEP [EXIT [TAIL]]   the events of advisor-install.sh
# It never reads a secret, and never fails its caller: a report that cannot be written is a
# missed report, not a failed replica.
set -uo pipefail

state_dir="${ADVISOR_STATE_DIR:-/var/lib/advisor}"
console="${ADVISOR_CONSOLE:-/dev/console}"

# a JSON string of one line: control characters dropped, cut to 300 characters (the most
# advisor.bootstatus keeps, TAIL_MAX), escaped
json_str() {
  local s
  s="$(printf '%s' "$1" | tr -d '\000-\037\177')"
  s="${s:0:300}"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}

# event STATE STEP EXIT TAIL REPLICA (EXIT and REPLICA may be empty)
event() {
  local ev
  ev="{\"v\":1,\"step\":$(json_str "$2"),\"state\":\"$1\""
  [[ "$3" =~ ^[0-9]+$ ]] && ev+=",\"exit\":$3"
  # t: epoch seconds to the millisecond, so that a reader can order the two copies of each
  # line (the direct write and cloud-init's, which the journal may delay) by time
  ev+=",\"t\":$(date +%s.%3N),\"tail\":$(json_str "$4")"
  [[ "$5" =~ ^[0-9]+$ ]] && ev+=",\"replica\":$5"
  ev+="}"
  printf 'advisor-boot: %s\n' "$ev"
  if [[ -w "$console" ]]; then
    printf 'advisor-boot: %s\n' "$ev" >>"$console" 2>/dev/null || true
  fi
  keep "$ev" "${5:+replica-$5}"
}

# boot-status.json: the latest install event's fields, and "replicas": {"N": latest event}
keep() {
  local part="${2:-install}"
  mkdir -p "$state_dir/parts" 2>/dev/null || return 0
  (
    flock -w 10 9 || exit 0
    printf '%s\n' "$1" >"$state_dir/parts/$part.json"
    local install='{' sep='' f n
    if [[ -s "$state_dir/parts/install.json" ]]; then
      install="$(<"$state_dir/parts/install.json")"
      install="${install%\}},"
    fi
    {
      printf '%s"replicas":{' "$install"
      for f in "$state_dir"/parts/replica-*.json; do
        [[ -s "$f" ]] || continue
        n="${f##*/replica-}"
        printf '%s"%s":%s' "$sep" "${n%.json}" "$(<"$f")"
        sep=','
      done
      printf '}}\n'
    } >"$state_dir/boot-status.json.tmp" && mv -f "$state_dir/boot-status.json.tmp" \
      "$state_dir/boot-status.json"
  ) 9>"$state_dir/.lock"
}

# the unit's last journal line of this run; with "own", vLLM's own rather than the health
# check's (a process that exited by itself said why; one that was stopped did not)
last_line() {
  local lines line=""
  lines="$(journalctl --no-pager -q -o cat -n 30 "_SYSTEMD_INVOCATION_ID=${INVOCATION_ID:-}" \
           2>/dev/null | grep -v -e '^[[:space:]]*$' -e '^advisor-boot:')"
  if [[ "${1:-}" == own ]]; then
    line="$(grep -v '^advisor-health:' <<<"$lines" | tail -n 1)"
  fi
  printf '%s' "${line:-$(tail -n 1 <<<"$lines")}"
}

mode="${1:-}"
case "$mode" in
  serving)
    event serving vllm "" "" "${2:-}" ;;
  stopped)
    result="${SERVICE_RESULT:-}"
    [[ "$result" == success ]] && exit 0
    code="${EXIT_STATUS:-}"
    why=""
    own=own
    if [[ "${EXIT_CODE:-}" != exited && -n "$code" ]]; then
      own=""
      # killed or dumped by a signal: the shell's convention, 128 + the signal's number
      why="killed by SIG$code: "
      n="$(kill -l "$code" 2>/dev/null || true)"
      code=""
      [[ "$n" =~ ^[0-9]+$ ]] && code=$((128 + n))
    fi
    step=vllm
    [[ "$result" == timeout ]] && step="vllm (start timed out)"
    sleep 0.5  # let journald take in the process's last lines
    event exited "$step" "$code" "$why$(last_line "$own")" "${2:-}" ;;
  install)
    event "${2:-}" "${3:-}" "${4:-}" "${5:-}" "" ;;
  *)
    printf 'usage: %s serving N | stopped N | install STATE STEP [EXIT [TAIL]]\n' "$0" >&2 ;;
esac
exit 0
