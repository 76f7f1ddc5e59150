#!/usr/bin/env bash
# Where a Go process's CPU went, by package: the samples of a perf
# recording (perf record -g -p PID), summed by the package of the function
# each was taken in (the kernel's own as one), as BENCHMARKS.md §14 gives
# them. With a process's CPU a check-out in µs (the probe's front or back
# CPU), each share is also given in µs a check-out.
#
#   scripts/perf-shares.sh front.data [CPU_US]
#
# The groups: the kernel; the Go runtime (its assembly helpers included);
# net/http, net, bufio, syscall and internal/poll; encoding/json; pgx; the
# schema validator and regexp; echo; the metrics; the project's own code
# (the floor's main included); the rest of the standard library and
# everything else, by the first element of its name.
set -euo pipefail

if [[ $# -lt 1 ]]; then
	echo "usage: $0 PERF_DATA [CPU_US_A_CHECK_OUT [FUNCTION...]]" >&2
	exit 2
fi
data=$1
cpu=${2:-0}
shift $(( $# < 2 ? $# : 2 ))
command -v perf >/dev/null || { echo "$0: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
[[ -r $data ]] || { echo "$0: cannot read $data" >&2; exit 1; }

if [[ $# -gt 0 ]]; then
	# Each function named, with everything under it, by its exact name.
	report=$(perf report -i "$data" --children --sort sym --stdio -g none --percent-limit 0 2>/dev/null)
	for f in "$@"; do
		awk -v cpu="$cpu" -v f="$f" '
		/^#/ || NF < 4 { next }
		{
			name = $0; sub(/^ *[0-9.]+% +[0-9.]+% +\[.\] /, "", name)
			if (name != f) next
			pct = $1; sub(/%$/, "", pct)
			found = 1
			if (cpu > 0) printf "%6.1f %%  %7.0f µs  %s\n", pct, pct / 100 * cpu, f
			else printf "%6.1f %%  %s\n", pct, f
			exit
		}
		END { if (!found) printf "   0.0 %%  %s (no sample)\n", f }' <<<"$report"
	done
	exit 0
fi

perf report -i "$data" --no-children --sort sym --stdio -g none --percent-limit 0 2>/dev/null |
	awk -v cpu="$cpu" '
	/^#/ || NF < 3 { next }
	{
		pct = $1; sub(/%$/, "", pct)
		if (pct !~ /^[0-9.]+$/) next
		kind = $2
		sym = $3
		if (kind == "[k]") g = "kernel"
		else if (sym ~ /^(runtime\.|internal\/runtime|gcWriteBarrier|aeshash|memeqbody|indexbytebody|cmpbody|countbody)/) g = "Go runtime"
		else if (sym ~ /^(net\/http|net\.|net\/textproto|net\/url|bufio\.|syscall\.|internal\/poll)/) g = "net/http, net, bufio, syscall"
		else if (sym ~ /^encoding\/json/) g = "encoding/json"
		else if (sym ~ /jackc\//) g = "pgx"
		else if (sym ~ /santhosh-tekuri|^regexp/) g = "schema validator, regexp"
		else if (sym ~ /labstack/) g = "echo"
		else if (sym ~ /prometheus/) g = "metrics"
		else if (sym ~ /checkoutlock\/|^main\./) g = "the project'"'"'s own code"
		else {
			# Another package: its import path, up to the first dot
			# after its last slash.
			g = sym
			if (match(g, /^[^(]*\//)) { rest = substr(g, RLENGTH + 1); g = substr(g, 1, RLENGTH); sub(/\..*/, "", rest); g = g rest }
			else sub(/\..*/, "", g)
			g = "other: " g
		}
		share[g] += pct
		total += pct
	}
	END {
		n = 0
		for (g in share) order[++n] = g
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (share[order[j]] > share[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
		for (i = 1; i <= n; i++) {
			g = order[i]
			if (share[g] < 0.3) continue
			if (cpu > 0) printf "%6.1f %%  %7.0f µs  %s\n", share[g], share[g] / 100 * cpu, g
			else printf "%6.1f %%  %s\n", share[g], g
		}
		printf "%6.1f %%  in all\n", total
	}'
