/* kdump: a one-shot user-space rdma_cm listener that records what a Linux
 * NFS/RDMA client (xprtrdma) sends first, for the golden test vectors in
 * testdata/golden/. It runs inside the rdmavm QEMU guest (see
 * e2e/golden/kclient-first-msg.sh); it never sends an RPC reply.
 *
 *   gcc -O2 -Wall -o /tmp/kdump e2e/golden/kdump.c -libverbs -lrdmacm
 *   kdump IPv4 PORT OUTDIR [timeout_s]
 *
 * Writes into OUTDIR:
 *   privdata.bin  the private data of the RDMA_CM_EVENT_CONNECT_REQUEST, exactly
 *                 as librdmacm delivers it (private_data_len bytes)
 *   msg1.bin      the first received Send, exactly wc.byte_len bytes
 *                 (RPC-over-RDMA header followed by the RPC call)
 *   msgN.bin      further Sends received within 3 s of the previous one (at most 8)
 *   kdump.txt     key=value: connect parameters, wc fields, lengths
 * The accept carries an RFC 8797 block: magic f6ab0e18, version 1, flags 0,
 * send/recv size 4096 (encoded 3/3), like the Linux server's.
 * The only RPC it answers is a NULL call (proc 0) sent as RDMA_MSG with empty
 * chunk lists: reply RDMA_MSG, credits 32, + RPC MSG_ACCEPTED/SUCCESS with an
 * AUTH_NONE verifier. So the client's next call (for an NFSv4.1 mount:
 * EXCHANGE_ID) arrives as msg2.bin; it is never answered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <poll.h>
#include <time.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define NRECV 32
#define RBUF  16384

static FILE *kv;
static char outdir[512];

static void die(const char *what) { fprintf(stderr, "kdump: %s failed\n", what); if (kv) fprintf(kv, "error=%s\n", what); exit(1); }

static void save(const char *name, const void *p, size_t n) {
	char path[600];
	snprintf(path, sizeof path, "%s/%s", outdir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) die("write file");
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms) {
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev)) return NULL;
	return ev;
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
	if (argc < 4) { fprintf(stderr, "usage: kdump IPv4 PORT OUTDIR [timeout_s]\n"); return 2; }
	int port = atoi(argv[2]), tmo = argc > 4 ? atoi(argv[4]) : 60;
	snprintf(outdir, sizeof outdir, "%s", argv[3]);
	char kvpath[600]; snprintf(kvpath, sizeof kvpath, "%s/kdump.txt", outdir);
	if (!(kv = fopen(kvpath, "w"))) die("open kdump.txt");
	setvbuf(kv, NULL, _IOLBF, 0);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (!ch || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) die("setup");
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP)) die("rdma_create_id");
	if (rdma_bind_addr(lid, (struct sockaddr *)&sa)) die("rdma_bind_addr");
	if (rdma_listen(lid, 4)) die("rdma_listen");
	printf("kdump: listening on %s:%d\n", argv[1], port); fflush(stdout);

	struct rdma_cm_event *ev = next_event(ch, tmo * 1000);
	if (!ev || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) die("wait CONNECT_REQUEST");
	id = ev->id;
	struct rdma_conn_param req = ev->param.conn;
	save("privdata.bin", req.private_data, req.private_data_len);
	fprintf(kv, "connect_private_data_len=%u\n", req.private_data_len);
	fprintf(kv, "connect_responder_resources=%u\nconnect_initiator_depth=%u\n", req.responder_resources, req.initiator_depth);
	fprintf(kv, "connect_flow_control=%u\nconnect_retry_count=%u\nconnect_rnr_retry_count=%u\nconnect_srq=%u\n",
		req.flow_control, req.retry_count, req.rnr_retry_count, req.srq);
	fprintf(kv, "device=%s\n", ibv_get_device_name(id->verbs->device));
	rdma_ack_cm_event(ev);

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, 2 * NRECV, NULL, NULL, 0) : NULL;
	if (!cq) die("pd/cq");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (rdma_create_qp(id, pd, &qa)) die("rdma_create_qp");
	char *buf = calloc(NRECV, RBUF);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, NRECV * RBUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) die("ibv_reg_mr");
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * RBUF), .length = RBUF, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(id->qp, &wr, &bad)) die("ibv_post_recv");
	}
	unsigned char mypriv[8] = { 0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3 };
	struct rdma_conn_param acc = {
		.private_data = mypriv, .private_data_len = sizeof mypriv,
		.responder_resources = req.initiator_depth < 16 ? req.initiator_depth : 16,
		.initiator_depth = req.responder_resources < 16 ? req.responder_resources : 16,
		.rnr_retry_count = 7,
	};
	if (rdma_accept(id, &acc)) die("rdma_accept");
	ev = next_event(ch, 10000);
	if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED) die("wait ESTABLISHED");
	rdma_ack_cm_event(ev);
	printf("kdump: ESTABLISHED\n"); fflush(stdout);

	char *sbuf = calloc(1, 4096);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!smr) die("ibv_reg_mr send");
	int n = 0;
	double end = now() + tmo, last = 0;
	while (now() < end && n < 8 && (n == 0 || now() < last + 3)) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(cq, 1, &wc);
		if (r < 0) die("ibv_poll_cq");
		if (r == 0) { poll(NULL, 0, 1); continue; }
		if (wc.status != IBV_WC_SUCCESS) { fprintf(kv, "wc_error_status=%d\n", wc.status); break; }
		if (wc.opcode == IBV_WC_SEND) continue;      /* our NULL reply went out */
		n++;
		last = now();
		char name[32]; snprintf(name, sizeof name, "msg%d.bin", n);
		save(name, buf + wc.wr_id * RBUF, wc.byte_len);
		fprintf(kv, "msg%d_byte_len=%u\nmsg%d_wc_opcode=%d\nmsg%d_wc_flags=%#x\n",
			n, wc.byte_len, n, wc.opcode, n, wc.wc_flags);
		printf("kdump: message %d: %u bytes\n", n, wc.byte_len); fflush(stdout);
		uint32_t *w = (uint32_t *)(buf + wc.wr_id * RBUF);
		/* RDMA_MSG, no chunks, RPC CALL rpcvers 2, proc 0 => answer NULL */
		if (wc.byte_len >= 52 && ntohl(w[1]) == 1 && ntohl(w[3]) == 0 && !w[4] && !w[5] && !w[6] &&
		    ntohl(w[8]) == 0 && ntohl(w[9]) == 2 && ntohl(w[12]) == 0) {
			uint32_t rep[] = { w[0], htonl(1), htonl(32), htonl(0), 0, 0, 0,
			                   w[7], htonl(1), htonl(0), htonl(0), htonl(0), htonl(0) };
			memcpy(sbuf, rep, sizeof rep);
			struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = sizeof rep, .lkey = smr->lkey };
			struct ibv_send_wr swr = { .wr_id = 1000, .sg_list = &sge, .num_sge = 1,
			                           .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
			if (ibv_post_send(id->qp, &swr, &bad)) die("ibv_post_send");
			fprintf(kv, "msg%d_answered=NULL\n", n);
		}
	}
	fprintf(kv, "messages=%d\n", n);
	rdma_disconnect(id);
	return n > 0 ? 0 : 1;
}
