// shim.h: the few C helpers the ibverbs provider needs where a cgo call per
// field would be slow or a union is awkward from Go. Each helper does one
// verbs call (or one loop of them) so a Go operation costs one cgo call.
#ifndef RDMAGW_IBVERBS_SHIM_H
#define RDMAGW_IBVERBS_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// gw_swr is a send work request as Go fills it; gw_post_send turns a batch
// of them into a linked ibv_send_wr chain in per-QP scratch memory.
struct gw_swr {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint32_t opcode;     // IBV_WR_*
	uint32_t flags;      // IBV_SEND_*
	uint32_t rkey;
	uint32_t inv_rkey;
	uint32_t sge_off;    // first SGE in the SGE array
	uint32_t num_sge;
};

struct gw_rwr {
	uint64_t wr_id;
	uint32_t sge_off;
	uint32_t num_sge;
};

// gw_wc is the part of an ibv_wc the provider reads.
struct gw_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t wc_flags;
	uint32_t inv_rkey;
};

// gw_event is a copy of an rdma_cm event, taken before it is acknowledged.
struct gw_event {
	int32_t  type;
	int32_t  status;
	uint64_t token;        // context of the event's id (listener's for a request)
	struct rdma_cm_id *id; // the event's id (the new id for a connect request)
	uint8_t  initiator_depth;
	uint8_t  responder_resources;
	uint8_t  consumer_reject;  // REJECTED by the peer's consumer (rdma_reject)
	uint8_t  private_len;
	uint8_t  private_data[255];
};

int gw_post_send(struct ibv_qp *qp, struct ibv_send_wr *scratch, struct gw_swr *w, struct ibv_sge *sge, int n, int *posted);
int gw_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct ibv_recv_wr *scratch, struct gw_rwr *w, struct ibv_sge *sge, int n, int *posted);
int gw_poll(struct ibv_cq *cq, struct ibv_wc *scratch, struct gw_wc *out, int n);
int gw_drain_cq_events(struct ibv_comp_channel *ch);
int gw_get_event(struct rdma_event_channel *ch, struct gw_event *out);
void gw_set_token(struct rdma_cm_id *id, uint64_t token);
int gw_set_nonblock(int fd);
struct ibv_qp *gw_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
                            int max_send_wr, int max_recv_wr, int max_sge);
int gw_modify_qp(struct rdma_cm_id *id, struct ibv_qp *qp, int state, int rnr_retry, int rd_atomic);
int gw_qp_error(struct ibv_qp *qp);
int gw_connect(struct rdma_cm_id *id, struct ibv_qp *qp, int has_srq, const void *pd, int pd_len,
               int initiator_depth, int responder_resources, int rnr_retry, int accept);
int gw_sockaddr(struct sockaddr *sa, uint8_t ip[16], int *port);
struct ibv_context *gw_device_context(const char *name, struct ibv_device_attr *attr);
int gw_resolve_addr(struct rdma_cm_id *id, const uint8_t *src, int srclen, const uint8_t *dst, int dstlen, int port, int timeout_ms);
int gw_bind_addr(struct rdma_cm_id *id, const uint8_t *ip, int iplen, int port);



// Wrappers for what verbs.h defines as macros or static inlines.
struct ibv_mr *gw_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);
int gw_req_notify(struct ibv_cq *cq);
#endif
