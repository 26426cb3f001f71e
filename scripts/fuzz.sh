#!/usr/bin/env bash
# Runs every Go fuzz target of the project for FUZZTIME each (default 10s),
# one after the other, and prints each target's final exec count.
# Usage: scripts/fuzz.sh [FUZZTIME]     e.g. scripts/fuzz.sh 60s
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-${FUZZTIME:-10s}}
fail=0
# Only the packages whose tests declare a fuzz target are listed (each
# `go test -list` links and runs the package's test binary: listing all
# of them cost CI about 25 s).
pkgs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
for pkg in $pkgs; do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "== $pkg $target ($t)"
		for attempt in 1 2; do
			if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" -parallel 2 "$pkg" 2>&1); then
				echo "$out" | grep -E 'fuzz: elapsed' | tail -1
				break
			fi
			# Go's fuzzer can end a short run with "context deadline
			# exceeded" and no failing input when the machine is busy (a
			# worker still starting as -fuzztime runs out). That is not a
			# finding: run the target once more. A real crash names the
			# input it wrote under testdata/fuzz and fails at once.
			if [ "$attempt" = 1 ] && echo "$out" | grep -q 'context deadline exceeded' &&
				! echo "$out" | grep -q 'Failing input written'; then
				echo "   (fuzzer deadline flake, no failing input: running it again)"
				continue
			fi
			echo "$out" | tail -30
			fail=1
			break
		done
	done
done
exit $fail
