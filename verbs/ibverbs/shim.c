//go:build ibverbs && cgo

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <netinet/in.h>
#include "shim.h"

int gw_post_send(struct ibv_qp *qp, struct ibv_send_wr *scratch, struct gw_swr *w, struct ibv_sge *sge, int n, int *posted)
{
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *wr = &scratch[i];
		memset(wr, 0, sizeof *wr);
		wr->wr_id = w[i].wr_id;
		wr->opcode = w[i].opcode;
		wr->send_flags = w[i].flags;
		wr->sg_list = w[i].num_sge ? &sge[w[i].sge_off] : NULL;
		wr->num_sge = w[i].num_sge;
		switch (w[i].opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_READ:
			wr->wr.rdma.remote_addr = w[i].remote_addr;
			wr->wr.rdma.rkey = w[i].rkey;
			break;
		case IBV_WR_SEND_WITH_INV:
			wr->invalidate_rkey = w[i].inv_rkey;
			// libsiw (rdma-core providers/siw, push_send_wqe) takes
			// the STag to invalidate from wr.rdma.rkey, not from
			// invalidate_rkey: without this siw sends whatever
			// wr.rdma.rkey holds (0) and the peer refuses the Send.
			// Other providers ignore wr.rdma for Sends.
			wr->wr.rdma.rkey = w[i].inv_rkey;
			break;
		}
		wr->next = i + 1 < n ? &scratch[i + 1] : NULL;
	}
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(qp, scratch, &bad);
	*posted = rc == 0 ? n : (bad ? (int)(bad - scratch) : 0);
	return rc;
}

int gw_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct ibv_recv_wr *scratch, struct gw_rwr *w, struct ibv_sge *sge, int n, int *posted)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr *wr = &scratch[i];
		wr->wr_id = w[i].wr_id;
		wr->sg_list = w[i].num_sge ? &sge[w[i].sge_off] : NULL;
		wr->num_sge = w[i].num_sge;
		wr->next = i + 1 < n ? &scratch[i + 1] : NULL;
	}
	struct ibv_recv_wr *bad = NULL;
	int rc = srq ? ibv_post_srq_recv(srq, scratch, &bad) : ibv_post_recv(qp, scratch, &bad);
	*posted = rc == 0 ? n : (bad ? (int)(bad - scratch) : 0);
	return rc;
}

int gw_poll(struct ibv_cq *cq, struct ibv_wc *scratch, struct gw_wc *out, int n)
{
	int got = ibv_poll_cq(cq, n, scratch);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = scratch[i].wr_id;
		out[i].status = scratch[i].status;
		out[i].opcode = scratch[i].opcode;
		out[i].byte_len = scratch[i].byte_len;
		out[i].qp_num = scratch[i].qp_num;
		out[i].wc_flags = scratch[i].wc_flags;
		out[i].inv_rkey = (scratch[i].wc_flags & IBV_WC_WITH_INV) ? scratch[i].invalidated_rkey : 0;
	}
	return got;
}

// gw_drain_cq_events takes every pending notification off a non-blocking
// completion channel and acknowledges it; it returns how many there were.
int gw_drain_cq_events(struct ibv_comp_channel *ch)
{
	int n = 0;
	for (;;) {
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(ch, &cq, &ctx))
			return n;
		ibv_ack_cq_events(cq, 1);
		n++;
	}
}

// gw_get_event copies the next rdma_cm event and acknowledges it at once, so
// rdma_destroy_id never waits on the dispatcher. Returns 0, or -1 with errno
// (EAGAIN when the non-blocking channel is empty).
int gw_get_event(struct rdma_event_channel *ch, struct gw_event *out)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		return -1;
	memset(out, 0, sizeof *out);
	out->type = ev->event;
	out->status = ev->status;
	out->id = ev->id;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		out->token = (uint64_t)(uintptr_t)ev->listen_id->context;
	else
		out->token = (uint64_t)(uintptr_t)ev->id->context;
	const void *pd = NULL;
	uint8_t len = 0;
	if (ev->id->ps == RDMA_PS_TCP || ev->id->ps == RDMA_PS_IB) {
		pd = ev->param.conn.private_data;
		len = ev->param.conn.private_data_len;
		out->initiator_depth = ev->param.conn.initiator_depth;
		out->responder_resources = ev->param.conn.responder_resources;
	}
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		// IB/RoCE: REJ reason 28 is "consumer defined" (rdma_reject);
		// iWARP: a refused MPA request with private data, reported as
		// -ECONNREFUSED (cxgb4) or -ECONNRESET (siw: "got mpa reject").
		out->consumer_reject = ev->status == 28 ||
			((ev->status == -ECONNREFUSED || ev->status == -ECONNRESET) && pd && len);
		if (!out->consumer_reject)
			len = 0;
	}
	if (pd && len) {
		out->private_len = len;
		memcpy(out->private_data, pd, len);
	}
	rdma_ack_cm_event(ev);
	return 0;
}

void gw_set_token(struct rdma_cm_id *id, uint64_t token) { id->context = (void *)(uintptr_t)token; }

int gw_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// gw_create_qp creates the RC QP with ibv_create_qp, not rdma_create_qp:
// the provider moves it through INIT/RTR/RTS itself (gw_modify_qp) so it
// can set its own RNR retry count, which the CM would otherwise take from
// the peer's connect message.
struct ibv_qp *gw_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
                            int max_send_wr, int max_recv_wr, int max_sge)
{
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = max_send_wr;
	a.cap.max_recv_wr = srq ? 0 : max_recv_wr;
	a.cap.max_send_sge = max_sge;
	a.cap.max_recv_sge = srq ? 0 : max_sge;
	return ibv_create_qp(pd, &a);
}

// gw_modify_qp moves qp to state with the attributes the CM computed for
// the id (path, PSNs, RDMA Read depths), overriding the RNR retry count in
// RTS and, when rd_atomic >= 0, the RDMA Read depth of the state: the
// responder resources (max_dest_rd_atomic) in RTR, the initiator depth
// (max_rd_atomic) in RTS. A passive side must override them: before
// rdma_accept the CM still holds the peer's REQ values, not the ones the
// accept negotiates.
int gw_modify_qp(struct rdma_cm_id *id, struct ibv_qp *qp, int state, int rnr_retry, int rd_atomic)
{
	struct ibv_qp_attr a;
	int mask = 0;
	memset(&a, 0, sizeof a);
	a.qp_state = state;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno ? errno : EINVAL;
	if (state == IBV_QPS_RTR && rd_atomic >= 0) {
		a.max_dest_rd_atomic = rd_atomic;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC;
	}
	if (state == IBV_QPS_RTS) {
		a.rnr_retry = rnr_retry;
		mask |= IBV_QP_RNR_RETRY;
		if (rd_atomic >= 0) {
			a.max_rd_atomic = rd_atomic;
			mask |= IBV_QP_MAX_QP_RD_ATOMIC;
		}
	}
	return ibv_modify_qp(qp, &a, mask);
}

int gw_qp_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int gw_connect(struct rdma_cm_id *id, struct ibv_qp *qp, int has_srq, const void *pd, int pd_len,
               int initiator_depth, int responder_resources, int rnr_retry, int accept)
{
	struct rdma_conn_param p;
	memset(&p, 0, sizeof p);
	p.private_data = pd;
	p.private_data_len = pd_len;
	p.initiator_depth = initiator_depth;
	p.responder_resources = responder_resources;
	p.retry_count = 7;
	p.rnr_retry_count = rnr_retry;
	p.qp_num = qp->qp_num;
	p.srq = has_srq;
	return accept ? rdma_accept(id, &p) : rdma_connect(id, &p);
}

// gw_sockaddr reads an IPv4 or IPv6 socket address; returns the IP length.
int gw_sockaddr(struct sockaddr *sa, uint8_t ip[16], int *port)
{
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)sa;
		memcpy(ip, &s->sin_addr, 4);
		*port = ntohs(s->sin_port);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
		memcpy(ip, &s->sin6_addr, 16);
		*port = ntohs(s->sin6_port);
		return 16;
	}
	return 0;
}

static socklen_t fill_sockaddr(struct sockaddr_storage *ss, const uint8_t *ip, int iplen, int port)
{
	memset(ss, 0, sizeof *ss);
	if (iplen == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, ip, 4);
		return sizeof *s;
	}
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	if (iplen == 16)
		memcpy(&s->sin6_addr, ip, 16);
	return sizeof *s;
}

int gw_resolve_addr(struct rdma_cm_id *id, const uint8_t *src, int srclen, const uint8_t *dst, int dstlen, int port, int timeout_ms)
{
	struct sockaddr_storage s, d;
	fill_sockaddr(&d, dst, dstlen, port);
	if (srclen) {
		fill_sockaddr(&s, src, srclen, 0);
		return rdma_resolve_addr(id, (struct sockaddr *)&s, (struct sockaddr *)&d, timeout_ms);
	}
	return rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, timeout_ms);
}

int gw_bind_addr(struct rdma_cm_id *id, const uint8_t *ip, int iplen, int port)
{
	struct sockaddr_storage s;
	fill_sockaddr(&s, ip, iplen, port);
	return rdma_bind_addr(id, (struct sockaddr *)&s);
}

// gw_device_context returns librdmacm's own verbs context for the named
// device (rdma_cm ids carry that context, so PDs, CQs and QPs must live on
// it) and queries its attributes. NULL when there is no such device.
struct ibv_context *gw_device_context(const char *name, struct ibv_device_attr *attr)
{
	int n = 0;
	struct ibv_context **list = rdma_get_devices(&n);
	if (!list)
		return NULL;
	struct ibv_context *found = NULL;
	for (int i = 0; i < n; i++) {
		if (!name[0] || strcmp(ibv_get_device_name(list[i]->device), name) == 0) {
			found = list[i];
			break;
		}
	}
	rdma_free_devices(list);
	if (found && ibv_query_device(found, attr))
		found = NULL;
	return found;
}

struct ibv_mr *gw_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

int gw_req_notify(struct ibv_cq *cq) { return ibv_req_notify_cq(cq, 0); }
