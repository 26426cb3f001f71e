#!/usr/bin/env bash
# The project's test command (`make test` runs this). On a fresh Debian 12
# machine with only Go, run as root: it installs the Debian packages the
# tests use (tshark, tcpdump, nfs-ganesha, libnfs tools) through
# scripts/install-deps.sh first. As another user it runs what it can and
# the tests that need a missing tool skip themselves, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/install-deps.sh ]; then
	scripts/install-deps.sh --test
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt: these files are not formatted (run gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "== go vet"
go vet ./...
echo "== go build (CGO_ENABLED=0)"
CGO_ENABLED=0 go build ./...
echo "== go test"
go test -count=1 -timeout 20m ./...
