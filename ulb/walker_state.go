package ulb

// Walker finds the DDP-eligible items of one RPC message's body. Reset it
// for each message; it keeps all its state inline and allocates nothing.
//
// Usage with a whole message in memory:
//
//	w.Reset(ulb.Reply, prog, vers, proc)
//	for off := 0; ; {
//		st, err := w.Next(body[off:])
//		if err != nil { ... }           // malformed: GARBAGE_ARGS / ERR_CHUNK
//		if st.Kind == ulb.StepDone { break }
//		if st.Kind == ulb.StepNeedMore { ... } // truncated message
//		it := st.Item                   // offsets relative to body[off:]
//		off += it.Offset + it.Length + it.Pad
//	}
//
// For a message arriving from a socket, pass the bytes read so far; on
// StepNeedMore read at least Need bytes and call Next again with the same
// start; on StepItem receive the item's body wherever it should land and
// continue with the bytes after its padding.
type Walker struct {
	Dir              Direction
	Prog, Vers, Proc uint32

	b     *binding
	off   int  // bytes walked before the current slice (for error offsets)
	items int  // items reported so far
	done  bool // StepDone returned

	v23 v23State // NFSv2/v3 position (nfs2.go, nfs3.go)
	v4  v4State  // NFSv4 COMPOUND position (nfs4*.go)
}

// Reset prepares w for a new message of prog/vers/proc in direction dir.
// It returns ErrUnsupported for programs without a binding. Programs with
// no eligible items (MOUNT, NLM, NSM, NFSACL) are supported and walk to
// StepDone at once.
func (w *Walker) Reset(dir Direction, prog, vers, proc uint32) error {
	*w = Walker{Dir: dir, Prog: prog, Vers: vers, Proc: proc}
	b, ok := bindings[progVers{prog, vers}]
	if !ok {
		return ErrUnsupported
	}
	w.b = b
	return nil
}

// Next parses from b, which starts where the previous step left off (see
// Step.Consumed), and reports the next eligible item, a need for more
// bytes, or the end.
func (w *Walker) Next(b []byte) (Step, error) {
	if w.b == nil {
		return Step{}, ErrUnsupported
	}
	if w.done {
		return Step{Kind: StepDone}, nil
	}
	var st Step
	var err error
	if w.Dir == Call {
		st, err = w.b.call(w, b)
	} else {
		st, err = w.b.reply(w, b)
	}
	if err != nil {
		return st, err
	}
	switch st.Kind {
	case StepItem:
		st.Item.Index = w.items
		w.items++
		w.off += st.Item.Offset + st.Item.Length + st.Item.Pad
	case StepDone:
		w.done = true
	}
	return st, nil
}

// Items is the number of items reported so far: the Index the next one
// will have.
func (w *Walker) Items() int { return w.items }

// Offset is the number of message bytes walked so far, including the
// bodies of reported items.
func (w *Walker) Offset() int { return w.off }

// fail builds a WalkError at offset at (relative to the current slice).
func (w *Walker) fail(op, at int, err error) error {
	return &WalkError{Prog: w.Prog, Vers: w.Vers, Proc: w.Proc, Op: op, Offset: w.off + at, Err: err}
}

// advance records bytes consumed by a step that reports no item.
func (w *Walker) advance(n int) { w.off += n }

// none is the call and reply walker of programs without eligible items.
func none(w *Walker, b []byte) (Step, error) { return Step{Kind: StepDone}, nil }
