// Package tcprpc implements the transport of ONC RPC over TCP as RFC 5531
// defines it: the record marking that frames RPC messages on a byte stream
// (§11). The messages themselves (call and reply headers, §9) are package
// oncrpc's.
//
// # Files
//
//	fragment.go          the fragment header word
//	recordreader.go      RecordReader: records apart, Peek, direct payload reads
//	recordwriter.go      RecordWriter: one record as one vectored write
//	recordwriter_vec.go  WriteRecordv: a record from any number of pieces;
//	                     AppendRecordv + Flush: several records, one writev
//	recordwriter_try.go  TryFlush: the queued records with one writev that
//	                     never waits; Flush writes what it left
//	recordwriter_shared.go  SharedRecordWriter: records of concurrent
//	                     callers gathered into one writev
//	errors.go            FrameError and its sentinels
//
// # Record marking
//
// A record (one RPC message) is sent as one or more fragments. Each
// fragment starts with a 4-byte big-endian header: the top bit says
// "last fragment of this record", the low 31 bits give the fragment's
// length in bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-------------------------------------------------------------+
//	|L|                 fragment length (31 bits)                   |
//	+-+-------------------------------------------------------------+
//	|                 fragment data (length bytes) ...              |
//	+---------------------------------------------------------------+
//
//	record = fragment(L=0)* fragment(L=1)
//
// RecordReader takes records apart and RecordWriter builds them. Both are
// written for the gateway's data path: the reader hands a record's head to
// the caller from a small read-ahead buffer and then receives a payload of
// known length directly into a buffer the caller chose (registered RDMA
// memory), so bulk data is copied once, by the kernel. The writer sends
// fragment header, head, payload and tail with one vectored write
// (writev on a *net.TCPConn) and never copies the payload.
//
// Nothing here is safe for concurrent use unless a comment says so: one
// goroutine reads a connection, and writes to it are serialised by the
// caller.
package tcprpc
