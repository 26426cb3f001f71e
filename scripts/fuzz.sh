#!/usr/bin/env bash
# Runs every Go fuzz target of the project for FUZZTIME each (default 10s),
# one after the other, and prints each target's final exec count.
# Usage: scripts/fuzz.sh [FUZZTIME]     e.g. scripts/fuzz.sh 60s
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-${FUZZTIME:-10s}}
fail=0
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "== $pkg $target ($t)"
		if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" -parallel 2 "$pkg" 2>&1); then
			echo "$out" | tail -30
			fail=1
		else
			echo "$out" | grep -E 'fuzz: elapsed' | tail -1
		fi
	done
done
exit $fail
