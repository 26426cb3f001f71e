package iwarp

import (
	"encoding/binary"
	"errors"
	"net"
	"slices"

	"github.com/rdmagw/rdmagw/verbs"
)

// The transmit side: one goroutine per connection turns work into FPDUs
// and writes them with writev. Payload bytes go from the caller's
// registered memory straight into the kernel: each FPDU is an iovec list
// of a preallocated header, the SGL pieces and a preallocated pad+CRC
// trailer, the CRC computed over the pieces in place.

const (
	batchFPDUs = 64
	batchBytes = 512 << 10
)

var (
	errStopped         = errors.New("iwarp: connection left RTS")
	errLocalProtection = errors.New("iwarp: local protection error")
)

type txState struct {
	c     *conn
	wbuf  net.Buffers // handed to WriteTo; a field so taking its address does not allocate
	iov   []([]byte)  // fixed-capacity backing for wbuf
	hdr   [batchFPDUs][fpduLenField + ddpUntaggedLen]byte
	trl   [batchFPDUs][3 + fpduCRCLen]byte
	nf    int
	bytes int
	held  []*mr // regions of the SGL being sent, held against Deregister
	rrq   [readReqLen]byte
	term  [termMaxLen]byte
}

func (t *txState) init(c *conn) {
	t.c = c
	t.iov = make([][]byte, 0, batchFPDUs*2+c.maxSGE+8)
	t.held = make([]*mr, 0, c.maxSGE)
}

// flush writes the batched FPDUs.
func (t *txState) flush() error {
	if t.nf == 0 {
		return nil
	}
	t.wbuf = t.iov
	_, err := t.wbuf.WriteTo(t.c.tc)
	t.iov = t.iov[:0]
	t.nf, t.bytes = 0, 0
	return err
}

// send segments one DDP message into FPDUs. h is the first segment's
// header (TO or MO advance per segment); the payload is either the SGL or
// payload.
func (t *txState) send(h ddpHeader, sgl []verbs.SGE, payload []byte, total int) error {
	c := t.c
	hl := h.Len()
	maxPay := c.maxULPDU - hl
	sgIdx, sgOff, mo := 0, 0, 0
	for first := true; first || mo < total; first = false {
		if t.nf == batchFPDUs || len(t.iov)+c.maxSGE+3 > cap(t.iov) || t.bytes >= batchBytes {
			if err := t.flush(); err != nil {
				return err
			}
			if !c.live.Load() {
				return errStopped
			}
		}
		n := min(total-mo, maxPay)
		seg := h
		if seg.Tagged {
			seg.TO = h.TO + uint64(mo)
		} else {
			seg.MO = h.MO + uint32(mo)
		}
		seg.Last = mo+n == total
		fh := t.hdr[t.nf][:fpduLenField+hl]
		binary.BigEndian.PutUint16(fh, uint16(hl+n))
		seg.put(fh[fpduLenField:])
		var crc uint32
		if c.crc {
			crc = crcUpdate(0, fh)
		}
		t.iov = append(t.iov, fh)
		if payload != nil {
			p := payload[mo : mo+n]
			if len(p) > 0 {
				t.iov = append(t.iov, p)
				if c.crc {
					crc = crcUpdate(crc, p)
				}
			}
		} else {
			for left := n; left > 0; {
				b := sgl[sgIdx].Buf[sgOff:]
				take := min(len(b), left)
				if take > 0 {
					p := b[:take]
					t.iov = append(t.iov, p)
					if c.crc {
						crc = crcUpdate(crc, p)
					}
				}
				sgOff += take
				left -= take
				if sgOff == len(sgl[sgIdx].Buf) {
					sgIdx++
					sgOff = 0
				}
			}
		}
		pad := fpduPad(hl + n)
		tr := t.trl[t.nf][:pad+fpduCRCLen]
		clear(tr[:pad])
		if c.crc {
			crc = crcUpdate(crc, tr[:pad])
		}
		putCRC(tr[pad:], crc)
		t.iov = append(t.iov, tr)
		t.nf++
		t.bytes += fpduSize(hl + n)
		mo += n
	}
	return nil
}

func untagged(op rdmapOpcode, qn, msn uint32) ddpHeader {
	return ddpHeader{Version: ddpVersion, RDMAP: rdmapCtrl(op), QN: qn, MSN: msn}
}

func tagged(op rdmapOpcode, stag uint32, to uint64) ddpHeader {
	return ddpHeader{Tagged: true, Version: ddpVersion, RDMAP: rdmapCtrl(op), STag: stag, TO: to}
}

// sendReadRequest sends an RDMA Read Request (a zero-length one for
// fences and the RFC 6581 RTR).
func (t *txState) sendReadRequest(msn uint32, rr *readRequest) error {
	rr.put(t.rrq[:])
	if err := t.send(untagged(opReadReq, qnReadReq, msn), nil, t.rrq[:], readReqLen); err != nil {
		return err
	}
	return t.flush()
}

// sendReadResponse answers a peer's Read Request from our region.
func (t *txState) sendReadResponse(ie *irqEntry) error {
	h := tagged(opReadResp, ie.sinkSTag, ie.sinkTO)
	if ie.n == 0 {
		if err := t.send(h, nil, nil, 0); err != nil {
			return err
		}
		return t.flush()
	}
	m := ie.m
	m.use.RLock()
	defer m.use.RUnlock()
	if m.dead {
		return errors.New("iwarp: region deregistered while an RDMA Read Response was sent from it")
	}
	if err := t.send(h, nil, m.b[ie.off:ie.off+ie.n], ie.n); err != nil {
		return err
	}
	return t.flush()
}

// hold read-locks the regions of an SGL (each once) so they cannot be
// deregistered while their bytes are sent; false if one is already gone.
func (t *txState) hold(sgl []verbs.SGE) bool {
	for i := range sgl {
		if len(sgl[i].Buf) == 0 {
			continue
		}
		m := t.c.dev.lookup(sgl[i].LKey)
		if m == nil {
			return false
		}
		if slices.Contains(t.held, m) {
			continue
		}
		m.use.RLock()
		t.held = append(t.held, m)
		if m.dead {
			return false
		}
	}
	return true
}

func (t *txState) release() {
	for _, m := range t.held {
		m.use.RUnlock()
	}
	clear(t.held)
	t.held = t.held[:0]
}

// sendWR transmits one send-queue entry.
func (t *txState) sendWR(e *sqEntry) error {
	defer t.release()
	if !t.hold(e.sgl) {
		return errLocalProtection
	}
	var h ddpHeader
	switch e.op {
	case verbs.OpSend:
		h = untagged(opSend, qnSend, e.msn)
	case verbs.OpSendInv:
		h = untagged(opSendInv, qnSend, e.msn)
		h.InvSTag = e.invRKey
	case verbs.OpRDMAWrite:
		h = tagged(opWrite, e.rkey, e.remoteAddr)
	}
	if err := t.send(h, e.sgl, nil, e.length); err != nil {
		return err
	}
	return t.flush()
}

func (c *conn) txLoop() {
	t := &c.tx
	defer c.txExit()
	// RFC 6581 peer-to-peer: the responder sends nothing before the
	// initiator's ready-to-receive message arrived.
	for {
		c.mu.Lock()
		seen, live := c.rtrSeen, c.state == stateLive
		c.mu.Unlock()
		if !live {
			return
		}
		if seen {
			break
		}
		select {
		case <-c.txKick:
		case <-c.dying:
		}
	}
	switch c.neg.sendRTR {
	case rtrWrite:
		if err := t.send(tagged(opWrite, 0, 0), nil, nil, 0); err == nil {
			err = t.flush()
		}
	case rtrRead:
		c.mu.Lock()
		c.orq[c.orqTail%uint64(len(c.orq))] = orqEntry{cover: c.sqSent}
		c.orqTail++
		msn := c.txMSN[qnReadReq]
		c.txMSN[qnReadReq]++
		c.mu.Unlock()
		t.sendReadRequest(msn, &readRequest{})
	}
	for {
		c.mu.Lock()
		if c.state != stateLive {
			c.mu.Unlock()
			return
		}
		// Read Responses first: the peer is waiting on them.
		if c.irqHead < c.irqTail {
			// Pop before sending: once the last byte is out the peer may
			// complete the Read and issue the next one at once.
			ie := c.irq[c.irqHead%uint64(len(c.irq))]
			c.irq[c.irqHead%uint64(len(c.irq))] = irqEntry{}
			c.irqHead++
			c.mu.Unlock()
			if err := t.sendReadResponse(&ie); err != nil {
				c.txFailed(err)
				return
			}
			continue
		}
		orqFull := c.orqTail-c.orqHead >= uint64(len(c.orq))
		if c.sqSent < c.sqTail {
			seq := c.sqSent
			e := c.sqAt(seq)
			if e.localErr != 0 {
				c.failSet, c.failSeq, c.failStat = true, seq, e.localErr
				c.mu.Unlock()
				c.fail(&verbs.CompletionError{Op: e.op, Status: e.localErr, ID: e.id},
					&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified})
				return
			}
			if e.op == verbs.OpRDMARead {
				if !orqFull {
					rr := readRequest{Size: uint32(e.length), SrcSTag: e.rkey, SrcTO: e.remoteAddr}
					if len(e.sgl) > 0 && e.length > 0 {
						rr.SinkSTag, rr.SinkTO = e.sgl[0].LKey, sgeAddr(&e.sgl[0])
					}
					e.msn = c.txMSN[qnReadReq]
					c.txMSN[qnReadReq]++
					e.sent = true
					c.sqSent++
					c.covered = c.sqSent
					c.orq[c.orqTail%uint64(len(c.orq))] = orqEntry{cover: seq + 1, user: true, seq: seq,
						sinkSTag: rr.SinkSTag, sinkTO: rr.SinkTO, length: e.length}
					c.orqTail++
					c.mu.Unlock()
					if err := t.sendReadRequest(e.msn, &rr); err != nil {
						c.txFailed(err)
						return
					}
					continue
				}
			} else {
				if e.op != verbs.OpRDMAWrite {
					e.msn = c.txMSN[qnSend]
					c.txMSN[qnSend]++
				}
				e.sent = true
				c.sqSent++
				c.mu.Unlock()
				if err := t.sendWR(e); err != nil {
					if errors.Is(err, errLocalProtection) {
						c.mu.Lock()
						c.failSet, c.failSeq, c.failStat = true, seq, verbs.StatusLocalProtection
						c.mu.Unlock()
						c.fail(&verbs.CompletionError{Op: e.op, Status: verbs.StatusLocalProtection, ID: e.id},
							&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified})
						return
					}
					c.txFailed(err)
					return
				}
				c.mu.Lock()
				e.wrote = true
				e.done = e.done || !c.fence
				c.mu.Unlock()
				if !c.fence {
					c.complete()
				}
				continue
			}
		} else if c.fence && c.covered < c.sqSent && !orqFull {
			// Prove placement of everything sent so far.
			c.orq[c.orqTail%uint64(len(c.orq))] = orqEntry{cover: c.sqSent}
			c.orqTail++
			c.covered = c.sqSent
			msn := c.txMSN[qnReadReq]
			c.txMSN[qnReadReq]++
			c.mu.Unlock()
			if err := t.sendReadRequest(msn, &readRequest{}); err != nil {
				c.txFailed(err)
				return
			}
			continue
		}
		c.mu.Unlock()
		select {
		case <-c.txKick:
		case <-c.dying:
		}
	}
}

func (c *conn) txFailed(err error) {
	if errors.Is(err, errStopped) {
		return
	}
	c.fail(&streamError{op: "write", err: err}, nil)
}

// txExit sends a pending Terminate, flushes the send queue and half-closes
// the stream.
func (c *conn) txExit() {
	c.fail(nil, nil) // no-op unless the loop ended on its own
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	t := &c.tx
	t.iov = t.iov[:0]
	t.nf, t.bytes = 0, 0
	if term != nil {
		n := term.put(t.term[:])
		if err := t.send(untagged(opTerminate, qnTerminate, 1), nil, t.term[:n], n); err == nil {
			t.flush()
		}
	}
	c.flushSQ()
	c.tc.CloseWrite()
	close(c.txDone)
}

type streamError struct {
	op  string
	err error
}

func (e *streamError) Error() string {
	return "iwarp: TCP stream " + e.op + " failed: " + e.err.Error()
}

func (e *streamError) Unwrap() []error { return []error{verbs.ErrNotConnected, e.err} }
