#!/bin/sh
# Ingests the same synthetic feeds into a new SQLite catalog and a new
# PostgreSQL catalog, alternating the two engines for ROUNDS rounds, each
# run under /usr/bin/time -v; prints one line per run: engine, wall time,
# CPU (user+sys) and peak RSS of patchline, the seconds of each source (the
# rest of the wall time is the merge), the load average after it.
#
# Usage: bench/ingest-engines.sh FEEDS POSTGRES_URL PATCHLINE...
# (FEEDS from bench/gen; POSTGRES_URL names a database this script may drop
# and create the schema "ingestbench" in; each PATCHLINE a binary, several
# to compare builds in the same rounds). ROUNDS defaults to 3.
set -eu
FEEDS=$1 PG=$2
shift 2
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SCHEMA=ingestbench
case $PG in *\?*) PGDSN="$PG&search_path=$SCHEMA" ;; *) PGDSN="$PG?search_path=$SCHEMA" ;; esac

run() { # binary engine catalog-dsn
	PL=$1
	shift
	/usr/bin/time -v -o "$WORK/time" "$PL" ingest --data "$WORK/data" --catalog-db "$2" \
		cvelist="$FEEDS/cvelist.zip" nvd="$FEEDS/nvd" epss="$FEEDS/epss_scores-2025-02-20.csv.gz" \
		kev="$FEEDS/known_exploited_vulnerabilities.json" osv="$FEEDS/osv" >"$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
	awk -v b="$(basename "$PL")" -v e="$1" -v l="$(uptime | sed 's/.*load average: //')" -F': ' '
		/Elapsed \(wall clock\)/ {w=$2} /User time/ {u=$2} /System time/ {s=$2}
		/Maximum resident set size/ {r=$2/1024}
		END {printf "%-9s %s  wall %s  cpu %.1f s  rss %.0f MB  load %s\n", e, b, w, u+s, r, l}' "$WORK/time"
	grep -E '^(cvelist|nvd|epss|kev|osv):' "$WORK/log" | awk '{printf "  %s %s", $1, $NF} END {print ""}'
}

for i in $(seq "$ROUNDS"); do
	for pl in "$@"; do
		rm -rf "$WORK/data"
		run "$pl" sqlite "$WORK/data/catalog.db"
		psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE; CREATE SCHEMA $SCHEMA" 2>/dev/null
		run "$pl" postgres "$PGDSN"
	done
done
