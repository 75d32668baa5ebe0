#!/usr/bin/env bash
# store-lines.sh BASE [OTHER...]: the non-test Go lines of the store code
# (internal/catalog, internal/control, internal/sqlitedb, internal/pgdb,
# less the store suites catalogtest, controltest and pgtest) at BASE and at
# HEAD, and the net change of every commit since BASE (merges bring nothing
# of their own here), summed apart for the commits OTHER (those of other
# capabilities) and for the rest. Files are counted without rename
# detection, so that a file moved into or out of the counted set counts
# whole.
set -euo pipefail

base=${1:?usage: store-lines.sh BASE [OTHER...]}
shift
others=" $(for c in "$@"; do git rev-parse --short=12 "$c"; done | tr '\n' ' ') "
paths=(internal/catalog internal/control internal/sqlitedb internal/pgdb)

# net FROM TO: added less deleted lines of the counted files.
net() {
	git diff --no-renames --numstat "$1" "$2" -- "${paths[@]}" |
		awk '$3 ~ /\.go$/ && $3 !~ /_test\.go$/ && $3 !~ /catalogtest|controltest|pgtest/ { n += $1 - $2 } END { print n + 0 }'
}

# lines REV: the counted lines at REV.
lines() {
	git ls-tree -r --name-only "$1" -- "${paths[@]}" |
		grep '\.go$' | grep -v '_test\.go$' | grep -Ev 'catalogtest|controltest|pgtest' |
		while read -r f; do git show "$1:$f"; done | wc -l
}

at_base=$(lines "$base")
echo "lines at $base: $at_base"
echo "lines at HEAD: $(lines HEAD)"
rest=0 other=0
for c in $(git rev-list --no-merges "$base..HEAD" -- "${paths[@]}"); do
	n=$(net "$c^" "$c")
	if [[ $others == *" $(git rev-parse --short=12 "$c") "* ]]; then
		other=$((other + n))
	else
		rest=$((rest + n))
	fi
done
echo "net of the commits given: $other"
echo "net of the other commits: $rest ($(awk -v r="$rest" -v b="$at_base" 'BEGIN { printf "%+.1f %%", 100 * r / b }') of the lines at $base)"
