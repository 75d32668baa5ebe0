#!/bin/sh
# Serves one catalog with several patchline binaries at once, each on a
# port it chooses, and drives the lookup API of each in turn with
# bench/load, round after round, so that builds are compared in the same
# minutes. Prints each round's table rows with the load average before it,
# and each server's RSS after it; the servers' gctrace goes to their logs
# in the work directory.
#
# Usage: bench/serve-ab.sh CATALOG_DIR PATCHLINE...
# (CATALOG_DIR the --data of an ingest, such as /tmp/patchline-bench/data;
# each PATCHLINE a binary). ROUNDS (3), MIXES (querybatch), DURATION (10s)
# and QUERY_CONNS (8) change the rounds; CATALOG_DB (a postgres:// URL)
# serves that catalog instead of CATALOG_DIR's, and several URLs separated
# by spaces give each binary its own, in order (for builds whose schemas
# differ, each with a catalog it ingested itself); COPY_DATA=1 gives each
# server a copy of CATALOG_DIR of its own, for builds whose migrations
# differ. Each server gets a control store of its own, so none builds its
# package index for agents. Each server answers one list before the
# rounds, so that every build has its summary index when they begin.
set -eu
cd "$(dirname "$0")/.."
DATA=$1
shift
ROUNDS=${ROUNDS:-3}
MIXES=${MIXES:-querybatch}
DURATION=${DURATION:-10s}
QUERY_CONNS=${QUERY_CONNS:-8}
WORK=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null || true; done; echo "logs in $WORK" >&2' EXIT INT TERM
${GO:-go} build -o "$WORK/load" ./bench/load

n=0
for pl in "$@"; do
	n=$((n + 1))
	dir=$DATA
	if [ "${COPY_DATA:-}" = 1 ]; then
		dir=$WORK/data-$n
		cp -r "$DATA" "$dir"
	fi
	db=$(echo "${CATALOG_DB:-}" | awk -v i="$n" '{ print (NF >= i) ? $i : $1 }')
	GODEBUG=gctrace=1 "$pl" serve --data "$dir" ${db:+--catalog-db "$db"} --control-db "$WORK/control-$n.db" \
		--cve-addr 127.0.0.1:0 --control-addr 127.0.0.1:0 --rate-limit off >"$WORK/serve-$n.log" 2>&1 &
	PIDS="$PIDS $!"
	echo "$!" >"$WORK/pid-$n"
done
addr() { sed -n "s/.*msg=listening service=lookup addr=\([^ ]*\).*/\1/p" "$WORK/serve-$1.log" | head -n1; }
for i in $(seq "$n"); do
	until [ -n "$(addr "$i")" ]; do
		kill -0 "$(cat "$WORK/pid-$i")" 2>/dev/null || { cat "$WORK/serve-$i.log" >&2; exit 1; }
		sleep 1
	done
	curl -fsS -o /dev/null "http://$(addr "$i")/api/v1/cve?limit=1"
done
sleep 2

for r in $(seq "$ROUNDS"); do
	i=0
	for pl in "$@"; do
		i=$((i + 1))
		echo "## round $r, $pl (load $(cut -d' ' -f1-3 /proc/loadavg))"
		"$WORK/load" cve -url "http://$(addr "$i")" -mixes "$MIXES" -query-conns "$QUERY_CONNS" \
			-duration "$DURATION" -rounds 1 -pid "$(cat "$WORK/pid-$i")" 2>/dev/null | grep -E '^\| [^w-]|RSS'
	done
done
