#!/usr/bin/env bash
# extract-xdr.sh - extract the XDR of RPC-over-RDMA version 2 from the draft.
#
#   scripts/extract-xdr.sh [DRAFT.xml [OUTDIR]]
#
# DRAFT.xml defaults to $RDMAGW_SPECS/draft-ietf-nfsv4-rpcrdma-version-two-07.xml
# ($RDMAGW_SPECS defaults to ../shared/specs, as seen from the main checkout);
# OUTDIR to rdmarpc/testdata/v2. It writes:
#
#   rpcrdma-v2.x         what the draft's own extraction script yields (its
#                        section "Extraction of the XDR Definition": the lines
#                        marked "///"), byte for byte. The constants test
#                        (rdmarpc TestV2ConstantsMatchXDR) parses this file.
#   rpcrdma-v2-rpcgen.x  the same, plus the least rpcgen and a C compiler need
#                        (rdmarpc TestV2RpcgenDifferential compiles it):
#     1. a prelude defining uint32, uint64 (the draft uses them undefined, as
#        RFC 4506 does not) and rpcrdma2_errcode (used, never defined);
#     2. "typedef rpcrdma2_propid uint32;" turned round: the draft names the
#        new type first, which declares a type uint32 of type rpcrdma2_propid;
#     3. the WRITE_CHUNKS arm of rpcrdma2_hdr_error renamed from
#        rdma_max_chunks (the READ_CHUNKS arm's name) to rdma_max_write_chunks:
#        two arms of one union cannot share a name in C.
#     Nothing else changes: every struct, list and union is the draft's.
#
# The output is committed; run this again only when the draft changes, and
# the test TestV2ExtractXDRReproducible checks that it still reproduces.
set -euo pipefail
cd "$(dirname "$0")/.."
specs=${RDMAGW_SPECS:-../shared/specs}
draft=${1:-$specs/draft-ietf-nfsv4-rpcrdma-version-two-07.xml}
out=${2:-rdmarpc/testdata/v2}
[ -r "$draft" ] || { echo "extract-xdr: cannot read $draft (set RDMAGW_SPECS or pass the path)" >&2; exit 1; }
mkdir -p "$out"

# The draft's own script (it reads the text rendering; in the XML the
# marked lines sit in CDATA sections, which changes nothing for them).
sed -n -e 's:^ */// ::p' -e 's:^ *///$::p' < "$draft" > "$out/rpcrdma-v2.x"

{
	cat <<'PRELUDE'
/* rdmagw: extracted by scripts/extract-xdr.sh with three fix-ups for rpcgen
 * (see the script). Prelude: types the draft uses without defining them. */
typedef unsigned int uint32;
typedef unsigned hyper uint64;
typedef uint32 rpcrdma2_errcode;

PRELUDE
	sed -e 's/^typedef rpcrdma2_propid uint32;$/typedef uint32 rpcrdma2_propid;/' \
	    -e '/case RDMA2_ERR_WRITE_CHUNKS:/{n;s/rdma_max_chunks;/rdma_max_write_chunks;/;}' \
	    "$out/rpcrdma-v2.x"
} > "$out/rpcrdma-v2-rpcgen.x"

# Each fix-up must have applied exactly once.
grep -q '^typedef uint32 rpcrdma2_propid;$' "$out/rpcrdma-v2-rpcgen.x" ||
	{ echo "extract-xdr: the propid typedef fix-up did not apply" >&2; exit 1; }
[ "$(grep -c 'rdma_max_write_chunks;' "$out/rpcrdma-v2-rpcgen.x")" = 1 ] ||
	{ echo "extract-xdr: the WRITE_CHUNKS arm fix-up did not apply" >&2; exit 1; }
echo "extract-xdr: wrote $out/rpcrdma-v2.x ($(wc -l < "$out/rpcrdma-v2.x") lines) and $out/rpcrdma-v2-rpcgen.x"
