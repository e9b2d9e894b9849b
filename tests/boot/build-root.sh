#!/usr/bin/env bash
# Build the disposable Debian root the boot test runs real cloud-init and systemd in.
#   tests/boot/build-root.sh [DEST]    (default: $ADVISOR_BOOT_ROOT or /var/tmp/advisor-boot/root-v2)
# Needs root, debootstrap and the Debian archive; takes 1-3 minutes; idempotent (a finished root
# carries a marker and is left alone). v2 carries python3-venv (Debian's real ensurepip and pip):
# the install test (tests/boot/test_boot_install.py) runs the real pip install of advisor's lock
# in it; the other boot tests lay a stand-in ensurepip over it so that `python3 -m venv` gets a
# pip that installs nothing.
set -euo pipefail
dest="${1:-${ADVISOR_BOOT_ROOT:-/var/tmp/advisor-boot/root-v2}}"
marker="$dest/.advisor-boot-root-v2"
if [[ -e "$marker" ]]; then
  echo "boot root ready: $dest"
  exit 0
fi
rm -rf "$dest.tmp"
mkdir -p "$(dirname "$dest")"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$dest.tmp" \
  "${ADVISOR_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
chroot "$dest.tmp" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends cloud-init numactl curl python3 python3-venv procps \
  iproute2 >/dev/null
chroot "$dest.tmp" apt-get clean
rm -rf "$dest.tmp/var/lib/apt/lists/"*
touch "$dest.tmp/.advisor-boot-root-v2"
mv "$dest.tmp" "$dest"
echo "boot root built: $dest"
