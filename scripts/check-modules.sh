#!/usr/bin/env bash
# Every module stands alone: `go mod tidy -diff` is clean outside the
# workspace (GOWORK=off), and a dependency whose packages two modules build
# is selected at the same version in both. Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
modules=(circulation circulation-storage sip2 schemas serverkit config migrations integration-tests)
status=0
versions=$(mktemp)
trap 'rm -f "$versions"' EXIT
for m in "${modules[@]}"; do
	if ! out=$(cd "$m" && GOWORK=off go mod tidy -diff 2>&1); then
		echo "$m: go mod tidy -diff is not clean outside the workspace:"
		echo "$out" | head -40
		status=1
	fi
	# The modules whose packages the module's code and tests build.
	(cd "$m" && GOWORK=off go list -deps -test -f '{{with .Module}}{{if not .Main}}{{if not .Replace}}{{.Path}} {{.Version}}{{end}}{{end}}{{end}}' ./...) |
		sort -u | sed "s|\$| $m|" >>"$versions"
done
# path version module: a path listed at more than one version disagrees.
disagree=$(awk '{ seen[$1][$2] = seen[$1][$2] " " $3 } END {
	for (p in seen) { n = 0; for (v in seen[p]) n++; if (n > 1) for (v in seen[p]) print p, v, "in" seen[p][v] } }' "$versions" | sort)
if [ -n "$disagree" ]; then
	echo "dependencies selected at different versions in different modules:"
	echo "$disagree"
	status=1
fi
exit $status
