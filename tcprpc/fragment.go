package tcprpc

// Fragment header layout (RFC 5531 §11): bit 31 marks the last fragment of a
// record, bits 0-30 hold the fragment's length.
const (
	fragmentHeaderLen = 4
	lastFragment      = 1 << 31
	fragmentLenMask   = 1<<31 - 1

	// MaxFragmentLen is the largest length a fragment header can carry.
	MaxFragmentLen = fragmentLenMask
)
