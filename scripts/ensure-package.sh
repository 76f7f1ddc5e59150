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
echo "ensure-package: installing $pkg for $cmd" >&2
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing on a fresh machine, or stale: refresh
# them once if the first attempt fails.
if ! $sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2; then
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2
fi
command -v "$cmd"
