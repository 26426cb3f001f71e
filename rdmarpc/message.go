package rdmarpc

// Piece is one contiguous part of an RPC message as it crosses between a
// transport engine and the gateway: the message is the concatenation of its
// pieces, in order.
//
// A DDP-eligible data item (ulb) is carried as its own piece with Item set:
// the body only, never the XDR pad. Whoever puts the message on a byte
// stream appends Pad zero bytes after it (see Message.WriteTo-style users);
// an RPC-over-RDMA engine may instead move the body into an RDMA chunk.
//
//	call spliced from a Read chunk at Position P:
//	  [ inline 0..P ][ chunk data (Item) ][ pad ][ inline P.. ]
//	reply with a READ result that arrived in a Write chunk:
//	  [ inline head ][ write-chunk data (Item) ][ pad ][ inline tail ]
type Piece struct {
	Data []byte
	// Item marks the body of a DDP-eligible item.
	Item bool
	// Buf is the registered buffer Data lies in (nil when Data is not
	// registered memory). An engine can RDMA-Write or expose only pieces
	// that have one.
	Buf *Buffer
	// Written is, of an Item piece of a reply, how many of its leading
	// bytes the handler has RDMA-written into the item's Write chunk
	// already (Call.WriteAhead); Reply writes the rest. 0 otherwise.
	Written int
}

// maxPieces bounds the pieces a Message holds without allocating: inline
// head and tail around each of a few items.
const maxPieces = 16

// Message is an RPC message (call or reply) in pieces. Its storage is
// inline; a Message is reused, never copied by value once in use.
type Message struct {
	XID    uint32
	Pieces []Piece
	store  [maxPieces]Piece
}

// Reset empties m, keeping its storage.
func (m *Message) Reset() {
	clear(m.store[:])
	m.Pieces = m.store[:0]
	m.XID = 0
}

// Append adds a piece; empty non-item pieces are skipped (an empty item is
// kept: its position still pairs it with a Write chunk).
func (m *Message) Append(p Piece) {
	if len(p.Data) == 0 && !p.Item {
		return
	}
	if m.Pieces == nil {
		m.Pieces = m.store[:0]
	}
	m.Pieces = append(m.Pieces, p)
}

// Len is the message's length on a byte stream: every piece plus the XDR
// pad after each item.
func (m *Message) Len() int {
	n := 0
	for i := range m.Pieces {
		n += len(m.Pieces[i].Data)
		if m.Pieces[i].Item {
			n += padLen(len(m.Pieces[i].Data))
		}
	}
	return n
}

// Items counts the item pieces.
func (m *Message) Items() int {
	n := 0
	for i := range m.Pieces {
		if m.Pieces[i].Item {
			n++
		}
	}
	return n
}

// AppendVec appends to vec the byte slices that put m on a byte stream,
// with the XDR pad after each item taken from a shared zero block, and
// returns the extended slice. It copies no payload.
func (m *Message) AppendVec(vec [][]byte) [][]byte {
	for i := range m.Pieces {
		p := &m.Pieces[i]
		if len(p.Data) > 0 {
			vec = append(vec, p.Data)
		}
		if p.Item {
			if n := padLen(len(p.Data)); n > 0 {
				vec = append(vec, zeroPad[:n])
			}
		}
	}
	return vec
}

// Flatten copies m onto b (which must hold m.Len() bytes) and returns the
// bytes written. For small inline messages and tests; the data path uses
// AppendVec or chunk placement instead.
func (m *Message) Flatten(b []byte) int {
	off := 0
	for i := range m.Pieces {
		off += m.Pieces[i].copyTo(b[off:])
	}
	return off
}

// copyTo copies p onto b, an item with its XDR pad, and returns the
// bytes written.
func (p *Piece) copyTo(b []byte) int {
	off := copy(b, p.Data)
	if p.Item {
		n := padLen(len(p.Data))
		clear(b[off : off+n])
		off += n
	}
	return off
}

// ReleaseBuffers returns every registered buffer the pieces hold to its
// pool. A buffer shared by several pieces is released once.
func (m *Message) ReleaseBuffers() {
	for i := range m.Pieces {
		b := m.Pieces[i].Buf
		if b == nil {
			continue
		}
		for j := i + 1; j < len(m.Pieces); j++ {
			if m.Pieces[j].Buf == b {
				m.Pieces[j].Buf = nil
			}
		}
		m.Pieces[i].Buf = nil
		b.Release()
	}
}

var zeroPad [4]byte

func padLen(n int) int { return -n & 3 }
