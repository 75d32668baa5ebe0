#!/bin/sh
# Runs the full-scale benchmarks and prints their results in Markdown:
# generate the synthetic feeds (cached by seed and size), ingest them into a
# new catalog under /usr/bin/time -v, serve it on 127.0.0.1, drive the lookup
# API and a bare handler with the same requests (bench/load), measure agent
# check-ins with `patchline sim`, then run the Go benchmarks of the hot paths.
#
# Settings (environment): BENCH_DIR (work directory, default
# /tmp/patchline-bench), SEED (1), CVES (300000), OSV (200000), CONNS (64, the GET by id mix), QUERY_CONNS (8, the list, batch and querybatch mixes; querybatch runs on 1 too),
# DURATION (10s per round), ROUNDS (3 rounds of each side, alternating with
# the bare handler), AGENTS (6000 simulated agents at a 1s interval),
# DATA (the real feed records used as templates, ../shared/data),
# REUSE_CATALOG=1 (skip the ingest and serve the catalog of the last run).
set -eu

cd "$(dirname "$0")/.."
GO=${GO:-go}
BENCH_DIR=${BENCH_DIR:-/tmp/patchline-bench}
SEED=${SEED:-1}
CVES=${CVES:-300000}
OSV=${OSV:-200000}
CONNS=${CONNS:-64}
QUERY_CONNS=${QUERY_CONNS:-8}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
AGENTS=${AGENTS:-6000}
DATA=${DATA:-../shared/data}

mkdir -p "$BENCH_DIR"
OUT="$BENCH_DIR/results.md"
# The feeds are cached by seed, size and the generator's source: a change
# of bench/gen makes new feeds.
GEN=$(cat bench/gen/*.go | cksum | cut -d' ' -f1)
FEEDS="$BENCH_DIR/feeds-$SEED-$CVES-$OSV-$GEN"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

say() { echo "$@" | tee -a "$OUT"; }
: >"$OUT"

$GO build -o "$BENCH_DIR/patchline" ./cmd/patchline
$GO build -o "$BENCH_DIR/load" ./bench/load
PL="$BENCH_DIR/patchline"

say "# Benchmark run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say ""
say "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); $($GO version)"
say "- load before: $(uptime | sed 's/.*load average/load average/')"
say "- catalog: $CVES CVEs, $OSV OSV records, seed $SEED"

if [ ! -f "$FEEDS/.done" ]; then
	rm -rf "$FEEDS"
	$GO run ./bench/gen -seed "$SEED" -cves "$CVES" -osv "$OSV" -data "$DATA" -out "$FEEDS"
	touch "$FEEDS/.done"
fi

# Ingest.
if [ "${REUSE_CATALOG:-}" != 1 ]; then
rm -rf "$BENCH_DIR/data"
/usr/bin/time -v -o "$BENCH_DIR/ingest.time" "$PL" ingest --data "$BENCH_DIR/data" \
	cvelist="$FEEDS/cvelist.zip" nvd="$FEEDS/nvd" epss="$FEEDS/epss_scores-2025-02-20.csv.gz" \
	kev="$FEEDS/known_exploited_vulnerabilities.json" osv="$FEEDS/osv" >"$BENCH_DIR/ingest.log" 2>&1
else
	# The catalog of an older run may have no body store, or one of another
	# generation: an ingest that changes no record writes it (or finds it
	# current), as the next sync of a served catalog would.
	"$PL" ingest --data "$BENCH_DIR/data" kev="$FEEDS/known_exploited_vulnerabilities.json" >"$BENCH_DIR/ingest-kev.log" 2>&1
fi
# A control store of its own for every run: agents left by an earlier run
# would make serve build the exposure index of the catalog.
rm -f "$BENCH_DIR/data/control.db" "$BENCH_DIR/data/control.db-wal" "$BENCH_DIR/data/control.db-shm"
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$BENCH_DIR/ingest.time")
rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f MB", $2/1024}' "$BENCH_DIR/ingest.time")
cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.0f s", u+s}' "$BENCH_DIR/ingest.time")
say ""
say "## Ingest"
say ""
say "full ingest: $wall (h:mm:ss) wall, $cpu CPU (user+sys), peak RSS $rss; catalog file $(du -m "$BENCH_DIR/data/catalog.db" | cut -f1) MB; $(uptime | sed 's/.*load average/load average after it/')"
say ""
say '```'
grep -E '^(cvelist|nvd|epss|kev|osv|catalog):' "$BENCH_DIR/ingest.log" | tee -a "$OUT"
say '```'

# Serve, on ports the system picks: the addresses are those the started
# process logs it listens on, and it must still run when they answer, so
# nothing else that happens to answer on a port is measured.
"$PL" serve --data "$BENCH_DIR/data" --cve-addr 127.0.0.1:0 --control-addr 127.0.0.1:0 \
	--rate-limit off >"$BENCH_DIR/serve.log" 2>&1 &
SERVE=$!
PIDS="$SERVE"
listening() { sed -n "s/.*msg=listening service=$1 addr=\([^ ]*\).*/\1/p" "$BENCH_DIR/serve.log" | head -n1; }
i=0
CVE_ADDR= CONTROL_ADDR=
until [ -n "$CVE_ADDR" ] && [ -n "$CONTROL_ADDR" ] && kill -0 "$SERVE" 2>/dev/null &&
	curl -fs "http://$CVE_ADDR/healthz" >/dev/null 2>&1 && curl -fs "http://$CONTROL_ADDR/healthz" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 240 ] || ! kill -0 "$SERVE" 2>/dev/null; then echo "serve did not start" >&2; cat "$BENCH_DIR/serve.log" >&2; exit 1; fi
	sleep 0.5
	CVE_ADDR=$(listening lookup) CONTROL_ADDR=$(listening control)
done
say ""
say "## Lookup API ($CONNS connections for GET by id, $QUERY_CONNS for lists and batches; $ROUNDS rounds of $DURATION on each side, alternating with the bare handler)"
say ""
say "serve RSS at start: $(awk '/VmRSS/ {printf "%.0f MB", $2/1024}' /proc/$SERVE/status); load: $(uptime | sed 's/.*load average/load average/')"
say ""
"$BENCH_DIR/load" cve -url "http://$CVE_ADDR" -conns "$CONNS" -query-conns "$QUERY_CONNS" -duration "$DURATION" -rounds "$ROUNDS" -pid "$SERVE" | tee -a "$OUT"

# Agent check-ins.
secret=$("$PL" enroll create --data "$BENCH_DIR/data")
"$PL" sim --server "http://$CONTROL_ADDR" --enroll-secret "$secret" --agents "$AGENTS" --interval 1s \
	--log-level error >"$BENCH_DIR/sim.log" 2>&1 &
SIM=$!
PIDS="$SIM $SERVE"
say ""
say "## Agent check-ins ($AGENTS simulated agents, 1 s interval, patchline sim)"
say ""
"$BENCH_DIR/load" checkins -metrics "http://$CONTROL_ADDR/metrics" -agents "$AGENTS" -duration "$DURATION" | tee -a "$OUT"
say "serve RSS after check-ins: $(awk '/VmRSS/ {printf "%.0f MB", $2/1024}' /proc/$SERVE/status); load: $(uptime | sed 's/.*load average/load average/')"
kill "$SIM" "$SERVE" 2>/dev/null || true
wait "$SIM" "$SERVE" 2>/dev/null || true
PIDS=""

# Go benchmarks of the hot paths.
say ""
say "## Go benchmarks"
say ""
say '```'
$GO test -run '^$' -bench 'GetRecord|BareHandler|List|Bulk|OSVQueryBatch' -benchtime 2s -benchmem ./internal/lookupapi | grep -E '^Benchmark' | tee -a "$OUT"
$GO test -run '^$' -bench 'RecordJSON' -benchtime 2s ./internal/catalog/sqlite | grep -E '^Benchmark' | tee -a "$OUT"
PATCHLINE_BENCH_CATALOG="$BENCH_DIR/data/catalog.db" $GO test -run '^$' -bench 'CatalogLists|CatalogBulk' -benchtime 2s ./bench/lookup | grep -E '^Benchmark' | tee -a "$OUT"
$GO test -run '^$' -bench 'CheckIn/sqlite' -benchtime 5000x ./internal/control/sqlstore | grep -E '^Benchmark' | tee -a "$OUT"
say '```'
say ""
say "load after: $(uptime | sed 's/.*load average/load average/')"
echo "results written to $OUT" >&2
