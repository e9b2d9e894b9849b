#!/usr/bin/env bash
# Install a vLLM lock for real, the way cloud-init does on a fresh instance, and keep the venv
# for tests/test_lock_install.py (which then imports vLLM in it and checks its CLI and tokenizer).
#   tools/prove_lock.sh [LOCK] [PYTHON] [DEST]
#     LOCK    default locks/vllm-0.11.0-cp310.txt
#     PYTHON  default /root/.pyenv/versions/3.10.13/bin/python3.10, else python3.10 on PATH
#             (Ubuntu 22.04's Python, the one AWS's DLAMI, GCP's accelerator image and Azure's
#             HPC image run); for the cp311 lock the default is /usr/bin/python3 where it is 3.11
#             (Debian 12's), else python3.11 on PATH. A Python other than the lock's is refused
#             before anything is installed (its wheels' hashes are not in the lock)
#     DEST    default /var/tmp/advisor-lock/venv-<first 12 hex of the lock's sha256>
# Real PyPI, ~10 GB, ~3 minutes. Idempotent: a finished venv carries the marker .advisor-lock-ok
# and is left alone; one without it (a failed or cut-off run) is wiped and built again. The venv
# is built in place rather than in DEST.tmp and renamed (as tests/boot/build-root.sh does): a
# venv is not relocatable (its console scripts' #! lines name its path), so the marker, written
# last, is what makes the build atomic for its readers.
# Writes DEST/advisor-lock-proof.json: install wall time, du of the venv, package count, versions.
# Then DEST/transformers5: transformers 5 and the three packages it needs newer, installed with
# --target beside the venv (never into it), so the test can show the failure the lock prevents
# (vllm-project/vllm#30466) by putting it first on PYTHONPATH; a failure there only skips that test.
set -euo pipefail

# Ubuntu 22.04 (jammy) seeds venvs with pip 22.0.2 (packages.ubuntu.com/jammy/python3-pip:
# 22.0.2+dfsg-1ubuntu0.x); the lock must install with that pip, not only a newer one.
PIP_VERSION="${ADVISOR_LOCK_PIP:-22.0.2}"
# what pip resolved for transformers>=5 on 2026-12-04 (transformers 5.20.2's METADATA needs
# huggingface-hub>=1.31, tokenizers>=0.23.1, safetensors>=0.8; the lock has older ones)
TRANSFORMERS5=(transformers==5.20.2 huggingface-hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0)

build() {
  local lock="$1" py="$2" dest="$3" start end du_h du_b
  if [[ -z "$py" || ! -x "$py" ]]; then
    echo "prove_lock: no Python at '$py'" >&2
    return 1
  fi
  # a lock is resolved for one Python (its name's cpXY): another one downloads other wheels,
  # whose hashes the lock does not list, and pip fails with a hash mismatch that hides why
  local want have
  want="$(sed -n 's/.*-cp3\([0-9][0-9]*\)\.txt$/3.\1/p' <<<"$lock")"
  have="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if [[ -n "$want" && "$have" != "$want" ]]; then
    echo "prove_lock: $lock is for Python $want, but $py is $have: pass a Python $want" \
      "(e.g. tools/prove_lock.sh $lock \$(command -v python$want))" >&2
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  "$py" -m venv "$dest"
  "$dest/bin/python" -m pip install -q --disable-pip-version-check "pip==$PIP_VERSION"
  start="$(date +%s.%N)"
  # exactly cloud-init's line: every file hash-checked, nothing resolved on the instance
  "$dest/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
    --require-hashes --no-deps -r "$lock"
  end="$(date +%s.%N)"
  "$dest/bin/python" -m pip check >"$dest/pip-check.txt" 2>&1 || true
  du_h="$(du -sh "$dest" | cut -f1)"
  du_b="$(du -sb "$dest" | cut -f1)"
  "$dest/bin/python" - "$lock" "$start" "$end" "$du_h" "$du_b" "$PIP_VERSION" "$py" \
    >"$dest/advisor-lock-proof.json" <<'EOF'
import hashlib, importlib.metadata as md, json, platform, sys
lock, start, end, du_h, du_b, pip_version, base = sys.argv[1:]
data = open(lock, "rb").read()
pins = [ln for ln in data.decode().splitlines() if ln and not ln.startswith("#")]
check = open(sys.prefix + "/pip-check.txt").read().strip()
json.dump({
    "lock": lock, "lock_sha256": hashlib.sha256(data).hexdigest(), "lock_pins": len(pins),
    "installed_distributions": len(list(md.distributions())),
    "python": platform.python_version(), "base_python": base, "pip": pip_version,
    "install_seconds": round(float(end) - float(start), 1), "venv_du": du_h,
    "venv_bytes": int(du_b), "pip_check": check,
    "vllm": md.version("vllm"), "torch": md.version("torch"),
    "transformers": md.version("transformers"),
}, sys.stdout, indent=2)
print()
EOF
  touch "$dest/.advisor-lock-ok"
  cat "$dest/advisor-lock-proof.json"
  echo "lock venv built: $dest"
}

overlay() {
  local dest="$1" target="$1/transformers5"
  if [[ -e "$target/.ok" ]]; then
    return 0
  fi
  rm -rf "$target"
  if "$dest/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
       --no-deps --target "$target" "${TRANSFORMERS5[@]}"; then
    touch "$target/.ok"
    echo "transformers 5 overlay built: $target"
  else
    echo "prove_lock: the transformers 5 overlay could not be installed; its test skips" >&2
  fi
}

main() {
  cd "$(dirname "$0")/.."
  local lock="${1:-locks/vllm-0.11.0-cp310.txt}"
  local py="${2:-/root/.pyenv/versions/3.10.13/bin/python3.10}"
  if [[ -z "${2:-}" && ! -x "$py" ]]; then py="$(command -v python3.10 || true)"; fi
  if [[ -z "${2:-}" && "$lock" == *-cp311.txt ]]; then  # Debian 12's, else any 3.11
    py=/usr/bin/python3
    [[ -x "$py" ]] && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
      || py="$(command -v python3.11 || true)"
  fi
  local key dest
  key="$(sha256sum "$lock" | cut -c1-12)"
  dest="${3:-/var/tmp/advisor-lock/venv-$key}"
  if [[ -e "$dest/.advisor-lock-ok" ]]; then
    echo "lock venv ready: $dest"
  else
    build "$lock" "$py" "$dest"
  fi
  overlay "$dest"
}

# the whole file is read before anything runs (function bodies, then this one line that exits),
# so editing it mid-run is safe
main "$@"; exit
