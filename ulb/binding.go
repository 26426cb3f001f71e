package ulb

// RPC program numbers of the NFS family.
const (
	ProgNFS    = 100003
	ProgMount  = 100005
	ProgNLM    = 100021
	ProgNSM    = 100024
	ProgNFSACL = 100227
)

// MaxItems bounds the eligible items an Estimate describes.
const MaxItems = 8

// Estimate is what a requester provisions for the reply to one call.
type Estimate struct {
	// Inline is an upper bound on the reply's size in bytes, counting
	// from the start of the RPC reply header, with every DDP-eligible result
	// removed (moved to a Write chunk). A requester offers a Reply chunk when
	// Inline exceeds its receive inline threshold.
	Inline int
	// Unpredictable is set when the binding says the reply size cannot be
	// bounded from the call (RFC 8267 §6.5.3: e.g. GETATTR of attributes of
	// unknown size); Inline is then a reasonable guess, not a bound.
	Unpredictable bool
	// NItems eligible results are expected, in order; Write chunk k should
	// have room for ItemMax[k] bytes of ItemKind[k].
	NItems   int
	ItemKind [MaxItems]Kind
	ItemMax  [MaxItems]int
}

// binding is one program/version's walkers and estimator. call and reply
// parse from b, which starts where the previous step of w stopped; they
// keep their position in w's state fields.
type binding struct {
	call     func(w *Walker, b []byte) (Step, error)
	reply    func(w *Walker, b []byte) (Step, error)
	estimate func(proc uint32, args []byte) (Estimate, error)
}

type progVers struct{ prog, vers uint32 }

// bindings is filled by each binding file's init.
var bindings = map[progVers]*binding{}

func register(prog, vers uint32, b *binding) { bindings[progVers{prog, vers}] = b }

// Supported reports whether a binding exists for prog/vers.
func Supported(prog, vers uint32) bool { _, ok := bindings[progVers{prog, vers}]; return ok }

// EstimateReply returns the reply provisioning for a call of prog/vers/proc
// whose arguments (after the RPC call header) are args.
func EstimateReply(prog, vers, proc uint32, args []byte) (Estimate, error) {
	b, ok := bindings[progVers{prog, vers}]
	if !ok {
		return Estimate{}, ErrUnsupported
	}
	return b.estimate(proc, args)
}

// BoundOnV2 reports whether RPC program prog may travel over
// RPC-over-RDMA version two: the NFS binding for version two
// (draft-ietf-nfsv4-nfs-ulb-v2, "MOUNT, NLM, and NSM Protocols") gives
// MOUNT, NLM and NSM none (servers provide them over TCP); NFS and NFSACL
// are bound (NFSACL with no DDP-eligible item, as here for both
// versions), and programs this package knows nothing of are left to the
// peers.
func BoundOnV2(prog uint32) bool {
	switch prog {
	case ProgMount, ProgNLM, ProgNSM:
		return false
	}
	return true
}
