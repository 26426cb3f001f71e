/*
 * judge.c - the independent judge of rdmarpc's version-two header codec.
 *
 * Built by TestV2RpcgenDifferential with the C that Debian's rpcgen makes
 * from rpcrdma-v2-rpcgen.x (the draft's XDR, see scripts/extract-xdr.sh);
 * nothing here decodes a field by hand: every item goes through the
 * generated xdr_* routines, and this file only picks the body structure
 * from rdma_htype (the draft's header type table, which its XDR has no
 * union for) and prints what they decoded.
 *
 * Input: one message per line, in hex. Output: one line per message,
 *
 *   ok <canonical form> enc=<hex>   the message decoded; enc is what the
 *                                   generated encoder writes back for the
 *                                   decoded structures
 *   reject <short|vers|htype|xdr|propval>
 *
 * The canonical form is the one v2Canonical (v2_judge_test.go) prints:
 *
 *   xid=%08x vers=%u credit=%u htype=%u len=%u <body>
 *
 * where len is the header length (for the types whose structure ends in
 * rdma_rpc_first_word, the length without that word: the RPC message
 * starts there) and the body is, by type:
 *
 *   ERROR           err=%u [vers=%u-%u | max=%u | index=%u need=%u | need=%u]
 *   GRANT           (nothing)
 *   CONNPROP_*      props=%u {which=%u data=<hex>}...
 *   CALL_EXTERNAL   inv=%x call=<reads> reads=<reads> writes=<writes> reply=<chunk|->
 *   CALL_INLINE     inv=%x reads=<reads> writes=<writes> reply=<chunk|->
 *   *_MIDDLE        remaining=%u
 *   REPLY_EXTERNAL  writes=<writes> reply=<chunk|->
 *   REPLY_INLINE    writes=<writes>
 *
 * with <reads> "[pos/handle/len/offset,...]", <chunk> "[handle/len/offset,...]"
 * and <writes> "[<chunk>,...]"; handles and offsets in hex, the rest decimal.
 * A known property (ids 1-6) whose rdma_data is not empty and not exactly
 * the encoding of its type (decoded with the generated xdr_rpcrdma2_prop_*)
 * is "propval".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "rpcrdma_v2.h"

static void put_seg(rpcrdma2_segment *s)
{
	printf("%x/%u/%llx", s->rdma_handle, s->rdma_length, (unsigned long long)s->rdma_offset);
}

static void put_reads(const char *name, rpcrdma2_read_list *l)
{
	printf(" %s=[", name);
	for (int i = 0; l; l = l->rdma_next, i++) {
		if (i) putchar(',');
		printf("%u/", l->rdma_entry.rdma_position);
		put_seg(&l->rdma_entry.rdma_target);
	}
	printf("]");
}

static void put_chunk(rpcrdma2_write_chunk *w)
{
	printf("[");
	for (u_int i = 0; i < w->rdma_target.rdma_target_len; i++) {
		if (i) putchar(',');
		put_seg(&w->rdma_target.rdma_target_val[i]);
	}
	printf("]");
}

static void put_writes(rpcrdma2_write_list *l)
{
	printf(" writes=[");
	for (int i = 0; l; l = l->rdma_next, i++) {
		if (i) putchar(',');
		put_chunk(&l->rdma_entry);
	}
	printf("]");
}

static void put_reply(rpcrdma2_write_chunk *w)
{
	printf(" reply=");
	if (w)
		put_chunk(w);
	else
		printf("-");
}

static void put_hex(const unsigned char *b, u_int n)
{
	for (u_int i = 0; i < n; i++)
		printf("%02x", b[i]);
}

/* prop_ok decodes a known property's value with its generated routine. */
static int prop_ok(rpcrdma2_propval *p)
{
	u_int n = p->rdma_data.rdma_data_len;
	XDR x;
	int ok;
	uint32 u;
	rpcrdma2_prop_hostauth a = {0};

	if (n == 0)
		return 1; /* the property's default */
	xdrmem_create(&x, p->rdma_data.rdma_data_val, n, XDR_DECODE);
	switch (p->rdma_which) {
	case RDMA2_PROPID_SBSIZ: ok = xdr_rpcrdma2_prop_sbsiz(&x, &u); break;
	case RDMA2_PROPID_RBSIZ: ok = xdr_rpcrdma2_prop_rbsiz(&x, &u); break;
	case RDMA2_PROPID_RSSIZ: ok = xdr_rpcrdma2_prop_rssiz(&x, &u); break;
	case RDMA2_PROPID_RCSIZ: ok = xdr_rpcrdma2_prop_rcsiz(&x, &u); break;
	case RDMA2_PROPID_BRS: ok = xdr_rpcrdma2_prop_brs(&x, &u); break;
	case RDMA2_PROPID_HOSTAUTH:
		ok = xdr_rpcrdma2_prop_hostauth(&x, &a);
		xdr_free((xdrproc_t)xdr_rpcrdma2_prop_hostauth, (char *)&a);
		break;
	default: return 1; /* unknown: not interpreted */
	}
	ok = ok && xdr_getpos(&x) == n;
	xdr_destroy(&x);
	return ok;
}

union body {
	rpcrdma2_hdr_error err;
	rpcrdma2_hdr_connprop cp;
	rpcrdma2_hdr_call_external ce;
	rpcrdma2_hdr_call_middle cm;
	rpcrdma2_hdr_call_inline ci;
	rpcrdma2_hdr_reply_external re;
	rpcrdma2_hdr_reply_middle rm;
	rpcrdma2_hdr_reply_inline ri;
};

static void judge(unsigned char *b, u_int n)
{
	XDR x;
	rpcrdma2_hdr_prefix p;
	union body u;
	xdrproc_t proc = NULL;
	int first_word = 0;
	static unsigned char enc[1 << 16];

	if (n < 16) {
		printf("reject short\n");
		return;
	}
	memset(&p, 0, sizeof p);
	memset(&u, 0, sizeof u);
	xdrmem_create(&x, (char *)b, n, XDR_DECODE);
	if (!xdr_rpcrdma2_hdr_prefix(&x, &p)) {
		printf("reject short\n");
		return;
	}
	if (p.rdma_start.rdma_vers != 2) {
		printf("reject vers\n");
		return;
	}
	switch (p.rdma_start.rdma_htype) {
	case RDMA2_ERROR: proc = (xdrproc_t)xdr_rpcrdma2_hdr_error; break;
	case RDMA2_GRANT: break;
	case RDMA2_CONNPROP_MIDDLE:
	case RDMA2_CONNPROP_FINAL: proc = (xdrproc_t)xdr_rpcrdma2_hdr_connprop; break;
	case RDMA2_CALL_EXTERNAL: proc = (xdrproc_t)xdr_rpcrdma2_hdr_call_external; break;
	case RDMA2_CALL_MIDDLE: proc = (xdrproc_t)xdr_rpcrdma2_hdr_call_middle; first_word = 1; break;
	case RDMA2_CALL_INLINE: proc = (xdrproc_t)xdr_rpcrdma2_hdr_call_inline; first_word = 1; break;
	case RDMA2_REPLY_EXTERNAL: proc = (xdrproc_t)xdr_rpcrdma2_hdr_reply_external; break;
	case RDMA2_REPLY_MIDDLE: proc = (xdrproc_t)xdr_rpcrdma2_hdr_reply_middle; first_word = 1; break;
	case RDMA2_REPLY_INLINE: proc = (xdrproc_t)xdr_rpcrdma2_hdr_reply_inline; first_word = 1; break;
	default:
		printf("reject htype\n");
		return;
	}
	if (proc && !proc(&x, &u)) {
		xdr_free(proc, (char *)&u);
		printf("reject xdr\n");
		return;
	}
	u_int len = xdr_getpos(&x) - (first_word ? 4 : 0);
	if (proc == (xdrproc_t)xdr_rpcrdma2_hdr_connprop) {
		for (u_int i = 0; i < u.cp.rdma_props.rpcrdma2_propset_len; i++) {
			if (!prop_ok(&u.cp.rdma_props.rpcrdma2_propset_val[i])) {
				xdr_free(proc, (char *)&u);
				printf("reject propval\n");
				return;
			}
		}
	}

	printf("ok xid=%08x vers=%u credit=%u htype=%u len=%u", p.rdma_start.rdma_xid,
	       p.rdma_start.rdma_vers, p.rdma_start.rdma_credit, p.rdma_start.rdma_htype, len);
	switch (p.rdma_start.rdma_htype) {
	case RDMA2_ERROR:
		printf(" err=%u", u.err.rdma_err);
		switch (u.err.rdma_err) {
		case RDMA2_ERR_VERS:
			printf(" vers=%u-%u", u.err.rpcrdma2_hdr_error_u.rdma_vrange.rdma_vers_low,
			       u.err.rpcrdma2_hdr_error_u.rdma_vrange.rdma_vers_high);
			break;
		case RDMA2_ERR_READ_CHUNKS: printf(" max=%u", u.err.rpcrdma2_hdr_error_u.rdma_max_chunks); break;
		case RDMA2_ERR_WRITE_CHUNKS: printf(" max=%u", u.err.rpcrdma2_hdr_error_u.rdma_max_write_chunks); break;
		case RDMA2_ERR_SEGMENTS: printf(" max=%u", u.err.rpcrdma2_hdr_error_u.rdma_max_segments); break;
		case RDMA2_ERR_WRITE_RESOURCE:
			printf(" index=%u need=%u", u.err.rpcrdma2_hdr_error_u.rdma_writeres.rdma_chunk_index,
			       u.err.rpcrdma2_hdr_error_u.rdma_writeres.rdma_length_needed);
			break;
		case RDMA2_ERR_REPLY_RESOURCE: printf(" need=%u", u.err.rpcrdma2_hdr_error_u.rdma_length_needed); break;
		}
		break;
	case RDMA2_CONNPROP_MIDDLE:
	case RDMA2_CONNPROP_FINAL:
		printf(" props=%u", u.cp.rdma_props.rpcrdma2_propset_len);
		for (u_int i = 0; i < u.cp.rdma_props.rpcrdma2_propset_len; i++) {
			rpcrdma2_propval *v = &u.cp.rdma_props.rpcrdma2_propset_val[i];
			printf(" {which=%u data=", v->rdma_which);
			put_hex((unsigned char *)v->rdma_data.rdma_data_val, v->rdma_data.rdma_data_len);
			printf("}");
		}
		break;
	case RDMA2_CALL_EXTERNAL:
		printf(" inv=%x", u.ce.rdma_inv_handle);
		put_reads("call", u.ce.rdma_call);
		put_reads("reads", u.ce.rdma_reads);
		put_writes(u.ce.rdma_provisional_writes);
		put_reply(u.ce.rdma_provisional_reply);
		break;
	case RDMA2_CALL_INLINE:
		printf(" inv=%x", u.ci.rdma_inv_handle);
		put_reads("reads", u.ci.rdma_reads);
		put_writes(u.ci.rdma_provisional_writes);
		put_reply(u.ci.rdma_provisional_reply);
		break;
	case RDMA2_CALL_MIDDLE: printf(" remaining=%u", u.cm.rdma_remaining); break;
	case RDMA2_REPLY_MIDDLE: printf(" remaining=%u", u.rm.rdma_remaining); break;
	case RDMA2_REPLY_EXTERNAL:
		put_writes(u.re.rdma_writes);
		put_reply(u.re.rdma_reply);
		break;
	case RDMA2_REPLY_INLINE: put_writes(u.ri.rdma_writes); break;
	}

	/* Encode what was decoded with the generated encoders. */
	XDR e;
	xdrmem_create(&e, (char *)enc, sizeof enc, XDR_ENCODE);
	if (!xdr_rpcrdma2_hdr_prefix(&e, &p) || (proc && !proc(&e, &u))) {
		printf(" enc=FAILED\n");
	} else {
		printf(" enc=");
		put_hex(enc, xdr_getpos(&e));
		printf("\n");
	}
	if (proc)
		xdr_free(proc, (char *)&u);
}

static int unhex(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

int main(void)
{
	/* A large count word makes the generated decoder calloc that many
	 * elements before it finds the input short, and xdr_free then walks
	 * them all. Bound the address space (no message here needs more than
	 * a few KiB) so such a calloc fails at once: "reject xdr", as the
	 * input is indeed short. */
	struct rlimit rl = {64 << 20, 64 << 20};
	setrlimit(RLIMIT_AS, &rl);

	static char line[1 << 17];
	static unsigned char msg[1 << 16];
	while (fgets(line, sizeof line, stdin)) {
		u_int n = 0;
		size_t l = strcspn(line, "\r\n");
		if (l % 2 != 0 || l / 2 > sizeof msg) {
			printf("badinput\n");
			continue;
		}
		for (size_t i = 0; i < l; i += 2) {
			int hi = unhex(line[i]), lo = unhex(line[i + 1]);
			if (hi < 0 || lo < 0) break;
			msg[n++] = (unsigned char)(hi << 4 | lo);
		}
		judge(msg, n);
		fflush(stdout);
	}
	return 0;
}
