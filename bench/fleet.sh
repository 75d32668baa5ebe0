#!/bin/bash
# Measures command delivery to a fleet that holds long polls, and what the
# held connections cost: two `serve` replicas on one PostgreSQL control
# database (created for the run, dropped at the end) and one Redis, a
# simulated fleet (`patchline sim`, one process per replica) that enrolls
# and holds its long polls (POST /agent/v1/wait), then one collect-logs
# command to each of COMMANDS agents through the control API, timed from
# the control database (createdAt to the agent's "running" report, in
# milliseconds) by `load fleet`. RSS and open descriptors of every process
# are shown before the fleet connects, once it holds its long polls and
# after the commands, each beside the load average.
#
# Settings (environment): BENCH_DIR (/tmp/patchline-fleet), AGENTS (10000
# in all), SIMS (2: one simulator per replica, AGENTS/SIMS agents each),
# COMMANDS (1000), RAMP (60s: the simulators start their agents spread
# over it, as a fleet that comes online does), CONNS (16 API calls in flight while queuing), WAIT (50s,
# the long poll each agent asks for), PG (postgres://postgres@127.0.0.1:5432,
# the server the run creates its database on), REDIS
# (redis://127.0.0.1:6379/0), WARMUP (10m, the longest wait for the fleet
# to hold its long polls).
set -eu

cd "$(dirname "$0")/.."
GO=${GO:-go}
BENCH_DIR=${BENCH_DIR:-/tmp/patchline-fleet}
AGENTS=${AGENTS:-10000}
SIMS=${SIMS:-2}
COMMANDS=${COMMANDS:-1000}
CONNS=${CONNS:-16}
WAIT=${WAIT:-50s}
RAMP=${RAMP:-60s}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS=${REDIS:-redis://127.0.0.1:6379/0}
WARMUP=${WARMUP:-10m}
DB=patchline_fleet_$$
DSN="$PG/$DB?sslmode=disable"

# Each replica holds a connection per agent's long poll and one per
# agent's idle keep-alive; each simulator as many.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR"
OUT="$BENCH_DIR/results.md"
PIDS=""
DBMADE=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
		kill -9 "$p" 2>/dev/null || true
	done
	if [ -n "$DBMADE" ]; then
		psql "$PG/postgres?sslmode=disable" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$@" | tee -a "$OUT"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
procs() { # NAME=PID …: RSS and open descriptors
	say "| process ($1) | RSS | open fds | threads |"
	say "|---|---:|---:|---:|"
	shift
	for np in "$@"; do
		n=${np%%=*} p=${np#*=}
		say "| $n | $(awk '/VmRSS/ {printf "%.0f MB", $2/1024}' /proc/$p/status) | $(ls /proc/$p/fd | wc -l) | $(awk '/Threads/ {print $2}' /proc/$p/status) |"
	done
	say ""
}
: >"$OUT"

$GO build -o "$BENCH_DIR/patchline" ./cmd/patchline
$GO build -o "$BENCH_DIR/load" ./bench/load
PL="$BENCH_DIR/patchline"

psql "$PG/postgres?sslmode=disable" -qc "CREATE DATABASE $DB" >/dev/null
DBMADE=1

say "# Fleet benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say ""
say "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); $($GO version); ulimit -n $(ulimit -n)"
say "- PostgreSQL $(psql "$PG/postgres?sslmode=disable" -Atc 'show server_version' | cut -d' ' -f1), a new database for the run; Redis $(redis-cli -u "$REDIS" info server 2>/dev/null | sed -n 's/^redis_version:\([^\r]*\).*/\1/p')"
say "- fleet: $AGENTS simulated agents in $SIMS simulators over 2 replicas, started over $RAMP, long poll $WAIT; $COMMANDS collect-logs commands"
say "- load average before: $(loadavg)"
say ""

# The schema, an enrollment secret and an API key, before any replica.
SECRET=$("$PL" enroll create --control-db "$DSN" 2>>"$BENCH_DIR/setup.log")
KEY=$("$PL" keys create --control-db "$DSN" --name "fleet benchmark" 2>>"$BENCH_DIR/setup.log")

# Two replicas on ports the system picks, each with a data directory of
# its own (an empty catalog) and the shared control database.
CONTROL=""
SERVES=""
for r in a b; do
	mkdir -p "$BENCH_DIR/data-$r"
	"$PL" serve --data "$BENCH_DIR/data-$r" --control-db "$DSN" --redis "$REDIS" \
		--cve-addr 127.0.0.1:0 --control-addr 127.0.0.1:0 >"$BENCH_DIR/serve-$r.log" 2>&1 &
	PIDS="$PIDS $!"
	SERVES="$SERVES serve-$r=$!"
done
for np in $SERVES; do
	n=${np%%=*} p=${np#*=}
	addr=
	i=0
	until [ -n "$addr" ] && kill -0 "$p" 2>/dev/null && curl -fs "http://$addr/healthz" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 240 ] || ! kill -0 "$p" 2>/dev/null; then echo "$n did not start" >&2; cat "$BENCH_DIR/$n.log" >&2; exit 1; fi
		sleep 0.5
		addr=$(sed -n 's/.*msg=listening service=control addr=\([^ ]*\).*/\1/p' "$BENCH_DIR/$n.log" | head -n1)
	done
	CONTROL="$CONTROL,http://$addr"
done
CONTROL=${CONTROL#,}
procs "before the fleet connects; $(loadavg)" $SERVES

# The simulators, one per replica in turn, each a fleet of its own seed,
# with commands a thousand times slower than life so that they are still
# running when they are read.
per=$((AGENTS / SIMS))
SIMPROCS=""
for s in $(seq 1 "$SIMS"); do
	url=$(echo "$CONTROL" | cut -d, -f$(((s - 1) % 2 + 1)))
	n=$per
	[ "$s" = "$SIMS" ] && n=$((AGENTS - per * (SIMS - 1)))
	"$PL" sim --server "$url" --enroll-secret "$SECRET" --agents "$n" --seed "$s" --wait "$WAIT" --ramp "$RAMP" \
		--time-scale 1000 --log-level warn >"$BENCH_DIR/sim-$s.log" 2>&1 &
	PIDS="$PIDS $!"
	SIMPROCS="$SIMPROCS sim-$s=$!"
done

all=$(echo $SERVES $SIMPROCS | tr ' ' ,)
timeout 30m "$BENCH_DIR/load" fleet -control "$CONTROL" -key "$KEY" -dsn "$DSN" -agents "$AGENTS" \
	-commands "$COMMANDS" -conns "$CONNS" -warmup "$WARMUP" -pids "$all" | tee -a "$OUT"

for np in $SERVES $SIMPROCS; do
	p=${np#*=}
	kill -0 "$p" 2>/dev/null || { say "${np%%=*} exited during the run:"; tail -n 20 "$BENCH_DIR/${np%%=*}.log" | tee -a "$OUT"; }
done
for f in "$BENCH_DIR"/serve-*.log "$BENCH_DIR"/sim-*.log; do
	c=$(grep -c 'level=\(WARN\|ERROR\)' "$f" || true)
	say "$(basename "$f" .log): $c warnings and errors logged$([ "$c" -gt 0 ] && echo ", the most frequent: $(grep 'level=\(WARN\|ERROR\)' "$f" | sed 's/^time=[^ ]* //' | sed 's/ \(err\|hostname\|endpoint\|command\|retry_in\)=.*//' | sort | uniq -c | sort -rn | head -n 1 | sed 's/^ *//')")"
done
say ""
say "load average after: $(loadavg)"
echo "results written to $OUT" >&2
