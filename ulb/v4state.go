package ulb

// v4State is the NFSv4 COMPOUND walkers' position within one message.
// A step works on a copy and stores it back only when it reports an item
// or the end, so a step that runs out of bytes leaves it unchanged.
type v4State struct {
	stage   int    // v4Header, v4Ops or v4CreateTail
	opsLeft uint32 // operations not yet walked
	opIndex int    // index of the next operation
	minor   uint32 // minorversion from the call header
	status  uint32 // COMPOUND status (reply)
}

// v4State stages.
const (
	v4Header     = iota // COMPOUND4args / COMPOUND4res header comes next
	v4Ops               // the next operation comes next
	v4CreateTail        // call: CREATE4args objname and createattrs after NF4LNK linkdata
)
