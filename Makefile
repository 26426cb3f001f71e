# rdmagw — see README.md. Every target is a thin wrapper over scripts/ so
# the same commands work where make is not installed.
GO       ?= go
FUZZTIME ?= 10s

.PHONY: build build-ibverbs lab-tools test fuzz bench vet deps lab-verbs e2e clean

build:
	CGO_ENABLED=0 $(GO) build -o bin/rdmagw ./cmd/rdmagw

# The libibverbs/librdmacm provider (needs libibverbs-dev, librdmacm-dev:
# scripts/install-deps.sh --lab).
build-ibverbs:
	CGO_ENABLED=1 $(GO) build -tags ibverbs -o bin/rdmagw-ibverbs ./cmd/rdmagw

# helpers the kernel lab's cases run in the guest, one per e2e/tools/<name>
# into bin/<name> (e2e/run.sh builds them the same way)
lab-tools:
	for d in e2e/tools/*/; do CGO_ENABLED=0 $(GO) build -o bin/$$(basename $$d) ./$$d || exit 1; done

deps:
	scripts/install-deps.sh --test

test:
	scripts/test.sh

vet:
	$(GO) vet ./...

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The verbs conformance suite on the ibverbs provider over soft-RoCE in the
# QEMU lab.
lab-verbs:
	e2e/lab/verbs-conformance.sh

# The kernel lab end to end (e2e/README.md): the Linux NFS client and
# knfsd over soft-RoCE in a QEMU guest, directly and through the gateway.
e2e:
	e2e/run.sh

clean:
	rm -rf bin
