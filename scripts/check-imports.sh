#!/usr/bin/env bash
# Checks that package imports point downward only (README "Layout"):
#
#   xdr < oncrpc, verbs/* < tcprpc, rdmarpc, ulb < gateway (shared pieces:
#   gateway, gateway/internal/*, gateway/metricname, gateway/auxrelay)
#   < gateway/forward, gateway/reverse < gateway/internal/modetest (tests
#   of both modes together) < cmd/*, e2e/*, deploy
#
# forward and reverse sit on one layer and never import each other.
#
# For every package (with and without the ibverbs build tag, and with its
# tests), each project package among its dependencies (`go list -deps`,
# transitive, so a detour through internal/* counts) must sit on the same
# layer or a lower one. internal/* helpers have no layer of their own.
# Prints each package's layer and its project dependencies; exits 1 on an
# upward import.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
{
	for tags in "" ibverbs; do
		go list -tags "$tags" -test -f '{{.ImportPath}} {{join .Deps " "}}' ./...
	done
} | sort -u | awk -v mod="$mod/" '
function layer(p) {
	if (p == "xdr") return 0
	if (p == "oncrpc" || p == "verbs" || p ~ /^verbs\//) return 1
	if (p == "tcprpc" || p == "rdmarpc" || p == "ulb") return 2
	if (p == "gateway/internal/modetest") return 3.6
	if (p ~ /^gateway\/(forward|reverse)(\/|$)/) return 3.5
	if (p == "gateway" || p ~ /^gateway\//) return 3
	if (p ~ /^(cmd|e2e)\// || p == "deploy") return 4
	return -1 # internal/*: no layer
}
function mode(p) {
	if (p ~ /^gateway\/forward(\/|$)/) return "forward"
	if (p ~ /^gateway\/reverse(\/|$)/) return "reverse"
	return ""
}
{
	pkg = $1
	sub(mod, "", pkg)
	if (pkg ~ /\.test$/) next                 # the generated test main
	sub(/ \[.*/, "", pkg)
	sub(/_test$/, "", pkg)                   # an external test package: the layer of its package
	l = layer(pkg)
	deps = ""
	for (i = 2; i <= NF; i++) {
		if (index($i, mod) != 1) continue
		d = substr($i, length(mod) + 1)
		sub(/\.test$/, "", d)
		if (d == pkg || $i ~ /\[/) continue
		ld = layer(d)
		if (!(d in seen)) seen[d] = 1
		if (mode(pkg) != "" && mode(d) != "" && mode(pkg) != mode(d)) {
			printf "SIDEWAYS: %s depends on %s (the modes never import each other)\n", pkg, d
			bad = 1
		}
		if (l >= 0 && ld > l) {
			printf "UPWARD: %s (layer %s) depends on %s (layer %s)\n", pkg, l, d, ld
			bad = 1
		}
		if (index(" " deps " ", " " d " ") == 0) deps = deps " " d
	}
	if (!(pkg in done)) { done[pkg] = 1; out[pkg] = sprintf("%s %s:%s", (l < 0 ? "-" : l), pkg, deps) }
	else if (length(deps) > length(out[pkg])) out[pkg] = sprintf("%s %s:%s", (l < 0 ? "-" : l), pkg, deps)
}
END {
	for (p in out) print out[p] | "sort -k2"
	close("sort -k2")
	if (bad) { print "import graph: an import points upward or sideways"; exit 1 }
	print "import graph: all imports point downward"
}'
