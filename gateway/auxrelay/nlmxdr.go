package auxrelay

import (
	"errors"

	"github.com/rdmagw/rdmagw/xdr"
)

// NLM argument decoding (nlm_prot.x, versions 1, 3 and 4; XNFS/Open Group
// "Protocols for Interworking: XNFS" chapter 10 and RFC 1813 appendix II).
// The relay reads just enough of each call to route the server's calls
// back (lock owner, caller_name, cookie) and remembers where caller_name
// and cookie sit so it can splice them.

// maxNLMString bounds cookie, caller_name, fh and oh: LM_MAXSTRLEN and
// MAXNETOBJ_SZ are both 1024.
const maxNLMString = 1024

// NLM procedure numbers.
const (
	nlmNull       = 0
	nlmTest       = 1
	nlmLock       = 2
	nlmCancel     = 3
	nlmUnlock     = 4
	nlmGranted    = 5
	nlmTestMsg    = 6
	nlmLockMsg    = 7
	nlmCancelMsg  = 8
	nlmUnlockMsg  = 9
	nlmGrantedMsg = 10
	nlmTestRes    = 11
	nlmLockRes    = 12
	nlmCancelRes  = 13
	nlmUnlockRes  = 14
	nlmGrantedRes = 15
	nlmShare      = 20
	nlmUnshare    = 21
	nlmNMLock     = 22
	nlmFreeAll    = 23
)

// nlmServerToClient reports whether proc is one a server calls on a
// client: GRANTED and the results of the client's asynchronous *_MSG calls.
func nlmServerToClient(proc uint32) bool {
	return proc == nlmGranted || (proc >= nlmGrantedMsg && proc <= nlmUnlockRes)
}

// span is a byte range [From, To) of the message: an XDR item to splice.
type span struct{ From, To int }

// nlmLockArg is nlm_lock / nlm4_lock (and the owner part of nlm_share).
type nlmLockArg struct {
	CallerName []byte
	CallerAt   span
	FH, OH     []byte
	Svid       int32 // not in nlm_share
	Offset     uint64
	Length     uint64
}

// nlmArgs is what the relay needs from an NLM call's arguments.
type nlmArgs struct {
	Cookie   []byte
	CookieAt span
	HasLock  bool
	Lock     nlmLockArg
	Block    bool // LOCK, LOCK_MSG, NM_LOCK, CANCEL
}

var errNLMVersion = errors.New("nlm: unknown version")

// decodeNLMArgs parses the arguments of NLM call vers/proc. base is the
// offset of args within the whole message, so spans index the message.
// Procedures without arguments the relay uses (NULL, FREE_ALL, unknown)
// return a zero nlmArgs and no error.
func decodeNLMArgs(vers, proc uint32, args []byte, base int) (nlmArgs, error) {
	var a nlmArgs
	if vers != 1 && vers != 3 && vers != 4 {
		return a, errNLMVersion
	}
	d := xdr.NewDecoder(args)
	switch proc {
	case nlmNull, nlmFreeAll:
		return a, nil
	case nlmTest, nlmTestMsg, nlmGranted, nlmGrantedMsg, nlmLock, nlmLockMsg, nlmNMLock,
		nlmCancel, nlmCancelMsg, nlmUnlock, nlmUnlockMsg, nlmShare, nlmUnshare,
		nlmTestRes, nlmLockRes, nlmCancelRes, nlmUnlockRes, nlmGrantedRes:
	default:
		return a, nil
	}
	at := d.Offset()
	var err error
	if a.Cookie, err = d.Opaque(maxNLMString); err != nil {
		return a, err
	}
	a.CookieAt = span{base + at, base + d.Offset()}
	switch proc {
	case nlmTestRes, nlmLockRes, nlmCancelRes, nlmUnlockRes, nlmGrantedRes:
		// nlm_res / nlm_testres: the cookie is all the relay needs.
		return a, nil
	case nlmShare, nlmUnshare:
		return a, decodeNLMShare(&d, &a, base)
	case nlmLock, nlmLockMsg, nlmNMLock, nlmCancel, nlmCancelMsg:
		if a.Block, err = d.Bool(); err != nil {
			return a, err
		}
	}
	switch proc {
	case nlmUnlock, nlmUnlockMsg:
	default: // every other lock-carrying call has "bool exclusive" next
		if _, err = d.Bool(); err != nil {
			return a, err
		}
	}
	if err = decodeNLMLock(&d, vers, &a.Lock, base); err != nil {
		return a, err
	}
	a.HasLock = true
	if proc == nlmLock || proc == nlmLockMsg || proc == nlmNMLock {
		if _, err = d.Bool(); err != nil { // reclaim
			return a, err
		}
		if _, err = d.Int32(); err != nil { // state
			return a, err
		}
	}
	return a, nil
}

func decodeNLMLock(d *xdr.Decoder, vers uint32, l *nlmLockArg, base int) error {
	at := d.Offset()
	var err error
	if l.CallerName, err = d.String(maxNLMString); err != nil {
		return err
	}
	l.CallerAt = span{base + at, base + d.Offset()}
	if l.FH, err = d.Opaque(maxNLMString); err != nil {
		return err
	}
	if l.OH, err = d.Opaque(maxNLMString); err != nil {
		return err
	}
	if l.Svid, err = d.Int32(); err != nil {
		return err
	}
	if vers == 4 {
		if l.Offset, err = d.Uint64(); err == nil {
			l.Length, err = d.Uint64()
		}
		return err
	}
	var off, n uint32
	if off, err = d.Uint32(); err == nil {
		n, err = d.Uint32()
	}
	l.Offset, l.Length = uint64(off), uint64(n)
	return err
}

// decodeNLMShare reads nlm_share { caller_name, fh, oh, mode, access } and
// the trailing reclaim flag.
func decodeNLMShare(d *xdr.Decoder, a *nlmArgs, base int) error {
	at := d.Offset()
	var err error
	if a.Lock.CallerName, err = d.String(maxNLMString); err != nil {
		return err
	}
	a.Lock.CallerAt = span{base + at, base + d.Offset()}
	if a.Lock.FH, err = d.Opaque(maxNLMString); err != nil {
		return err
	}
	if a.Lock.OH, err = d.Opaque(maxNLMString); err != nil {
		return err
	}
	for range 2 { // mode, access
		if _, err = d.Int32(); err != nil {
			return err
		}
	}
	if _, err = d.Bool(); err != nil {
		return err
	}
	a.HasLock = true
	return nil
}
