#!/usr/bin/env bash
# Makes sure a command from one of Debian's packages is installed:
#   scripts/ensure-package.sh <command> <package>
# Installs the package with apt-get when the command is missing (as root, or
# through sudo), and prints the command's path.
set -euo pipefail
cmd="$1" pkg="$2"
if path=$(command -v "$cmd"); then
  echo "$path"
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "ensure-package: $cmd is missing; install Debian's $pkg (apt-get install $pkg)" >&2
    exit 1
  fi
  sudo=sudo
fi
# Concurrent callers (tests running in parallel) take turns: the first
# installs, the others find the command when their turn comes. apt-get also
# waits for a dpkg lock held by anyone else instead of failing.
exec 9>"${TMPDIR:-/tmp}/checkout-lock-ensure-package.lock"
flock 9
if path=$(command -v "$cmd"); then
  echo "$path"
  exit 0
fi
echo "ensure-package: installing $pkg for $cmd" >&2
export DEBIAN_FRONTEND=noninteractive
apt=($sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "$pkg")
# The package lists may be missing on a fresh machine, or stale: refresh
# them once if the first attempt fails.
if ! "${apt[@]}" >&2; then
  $sudo apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
  "${apt[@]}" >&2
fi
command -v "$cmd"
