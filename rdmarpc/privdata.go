package rdmarpc

import (
	"encoding/binary"
	"fmt"
)

// RDMA-CM private data (RFC 8797, "Remote Direct Memory Access - Connection
// Manager (RDMA-CM) Private Data for RPC-over-RDMA Version 1"). The
// requester puts it in its connect request and the responder in its
// accept; it tells the peer the sender's inline sizes and whether it can
// take Send With Invalidate. Linux struct rpcrdma_connect_private:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Format Identifier 0xf6ab0e18                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Version = 1  |    Flags      |   Send Size   | Receive Size  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags bit 0 (0x01) is "Send With Invalidate OK" (Remote Invalidation);
// the other bits are reserved: sent as zero, ignored on receipt. A size
// byte v means (v+1) KiB, so sizes run from 1 KiB to 256 KiB.
//
// The block is an extension that a peer may not send at all, and the CM
// pads private data with zeros (InfiniBand carries 56 bytes in a REQ), so
// ParsePrivateData accepts anything at least 8 bytes long and reports
// "absent" for anything it does not recognise. Without it both sides
// assume the version-one default inline threshold of 1 KiB.
const (
	PrivateDataMagic   = 0xf6ab0e18
	PrivateDataVersion = 1
	PrivateDataSize    = 8

	// privFlagRemoteInvalidate is RPCRDMA_CMP_F_SND_W_INV_OK.
	privFlagRemoteInvalidate = 0x01

	// DefaultInlineSize is the inline threshold each direction assumes
	// when the peer sent no private data (rfc5666bis §4.3.3).
	DefaultInlineSize = 1024
	// MinInlineSize and MaxInlineSize bound what a size byte can say.
	MinInlineSize = 1 << 10
	MaxInlineSize = 256 << 10
)

// PrivateData is the content of an RFC 8797 private data block.
type PrivateData struct {
	// RemoteInvalidate: the sender can take Send With Invalidate, so the
	// peer may invalidate one of its R_keys with the Send of a reply.
	RemoteInvalidate bool
	// MaxSendSize is the largest Send, in bytes, the sender will post: the
	// peer's receive buffers need be no larger.
	MaxSendSize int
	// MaxRecvSize is the size, in bytes, of the sender's receive buffers:
	// the peer must not Send more.
	MaxRecvSize int
}

// EncodeInlineSize converts a size in bytes to its private data byte,
// (size >> 10) - 1. Sizes are clamped to MinInlineSize..MaxInlineSize and
// rounded down to a whole KiB, so the value never promises more than size.
func EncodeInlineSize(size int) uint8 {
	size = min(max(size, MinInlineSize), MaxInlineSize)
	return uint8(size>>10 - 1)
}

// InlineSizeExact reports whether a size byte says size exactly: a whole
// number of KiB from MinInlineSize to MaxInlineSize (a threshold a
// gateway announces or a bench sets must not be rounded down unseen).
func InlineSizeExact(size int) bool {
	return size >= MinInlineSize && size <= MaxInlineSize && size%(1<<10) == 0
}

// DecodeInlineSize converts a private data size byte to bytes, (v+1) << 10.
func DecodeInlineSize(v uint8) int { return (int(v) + 1) << 10 }

// Encode writes the 8-byte block into b.
func (p PrivateData) Encode(b []byte) (int, error) {
	if len(b) < PrivateDataSize {
		return 0, fmt.Errorf("rpcrdma: private data needs %d bytes, have %d", PrivateDataSize, len(b))
	}
	binary.BigEndian.PutUint32(b, PrivateDataMagic)
	b[4] = PrivateDataVersion
	b[5] = 0
	if p.RemoteInvalidate {
		b[5] = privFlagRemoteInvalidate
	}
	b[6] = EncodeInlineSize(p.MaxSendSize)
	b[7] = EncodeInlineSize(p.MaxRecvSize)
	return PrivateDataSize, nil
}

// Append appends the 8-byte block to b.
func (p PrivateData) Append(b []byte) []byte {
	var buf [PrivateDataSize]byte
	p.Encode(buf[:])
	return append(b, buf[:]...)
}

// ParsePrivateData decodes a private data block received with a connect
// request or accept. ok is false when b is shorter than 8 bytes, or its
// format identifier or version is not the one defined here: the caller
// then falls back to DefaultInlineSize both ways and no Remote
// Invalidation. Bytes past the eighth (CM padding) are ignored.
func ParsePrivateData(b []byte) (p PrivateData, ok bool) {
	if len(b) < PrivateDataSize ||
		binary.BigEndian.Uint32(b) != PrivateDataMagic ||
		b[4] != PrivateDataVersion {
		return PrivateData{}, false
	}
	return PrivateData{
		RemoteInvalidate: b[5]&privFlagRemoteInvalidate != 0,
		MaxSendSize:      DecodeInlineSize(b[6]),
		MaxRecvSize:      DecodeInlineSize(b[7]),
	}, true
}

// InlineThresholds returns the inline thresholds for a connection: send is
// the largest message this side may Send, recv the largest it will
// receive. local is what this side offered; peer and peerOK are what
// ParsePrivateData returned for the peer's block. Without a block the peer
// is taken to have offered DefaultInlineSize both ways, as Linux does.
func InlineThresholds(local, peer PrivateData, peerOK bool) (send, recv int) {
	if !peerOK {
		peer = PrivateData{MaxSendSize: DefaultInlineSize, MaxRecvSize: DefaultInlineSize}
	}
	return min(local.MaxSendSize, peer.MaxRecvSize), min(local.MaxRecvSize, peer.MaxSendSize)
}
