package oncrpc

import (
	"github.com/rdmagw/rdmagw/xdr"
)

// AuthFlavor is an opaque_auth flavor (RFC 5531 §8.2, IANA registry).
type AuthFlavor uint32

// Flavors the gateway meets. Only RPCSEC_GSS is ever looked into.
const (
	AuthNone  AuthFlavor = 0 // AUTH_NONE
	AuthSys   AuthFlavor = 1 // AUTH_SYS (AUTH_UNIX)
	AuthShort AuthFlavor = 2 // AUTH_SHORT
	AuthDH    AuthFlavor = 3 // AUTH_DH
	RPCSecGSS AuthFlavor = 6 // RPCSEC_GSS (RFC 2203)
	AuthTLS   AuthFlavor = 7 // AUTH_TLS (RFC 9289)
)

// MaxAuthBytes is the largest opaque_auth body RFC 5531 allows.
const MaxAuthBytes = 400

// OpaqueAuth is a credential or verifier:
//
//	struct opaque_auth {
//	    auth_flavor flavor;
//	    opaque body<400>;
//	};
//
// Body is a sub-slice of the decoded message; it is not copied.
type OpaqueAuth struct {
	Flavor AuthFlavor
	Body   []byte
}

// NullAuth is AUTH_NONE with an empty body, the verifier of most replies.
var NullAuth = OpaqueAuth{Flavor: AuthNone}

// encodedLen is the XDR size of a.
func (a *OpaqueAuth) encodedLen() int { return 8 + xdr.RoundUp(len(a.Body)) }

// decodeAuth reads an opaque_auth; field names it in errors.
func decodeAuth(d *xdr.Decoder, a *OpaqueAuth, field string) error {
	at := d.Offset()
	f, err := d.Uint32()
	if err != nil {
		return &HeaderError{Field: field, Offset: at, Err: err}
	}
	lenAt := d.Offset()
	body, err := d.Opaque(MaxAuthBytes)
	if err != nil {
		if xe, ok := err.(*xdr.Error); ok && xe.Err == xdr.ErrTooLong {
			return &HeaderError{Field: field, Offset: lenAt, Value: uint32(xe.Want), Err: ErrAuthTooLong}
		}
		return &HeaderError{Field: field, Offset: lenAt, Err: err}
	}
	a.Flavor, a.Body = AuthFlavor(f), body
	return nil
}

// encodeAuth writes a, refusing a body over MaxAuthBytes.
func encodeAuth(e *xdr.Encoder, a *OpaqueAuth, field string) error {
	if len(a.Body) > MaxAuthBytes {
		return &HeaderError{Field: field, Offset: e.Len(), Value: uint32(min(len(a.Body), 1<<32-1)), Err: ErrAuthTooLong}
	}
	e.PutUint32(uint32(a.Flavor))
	e.PutOpaque(a.Body)
	return nil
}

// GSSProc is rpc_gss_proc_t (RFC 2203 §5).
type GSSProc uint32

const (
	GSSProcData         GSSProc = 0 // RPCSEC_GSS_DATA
	GSSProcInit         GSSProc = 1 // RPCSEC_GSS_INIT
	GSSProcContinueInit GSSProc = 2 // RPCSEC_GSS_CONTINUE_INIT
	GSSProcDestroy      GSSProc = 3 // RPCSEC_GSS_DESTROY
)

// GSSService is rpc_gss_service_t (RFC 2203 §5).
type GSSService uint32

const (
	GSSServiceNone      GSSService = 1 // rpc_gss_svc_none: krb5
	GSSServiceIntegrity GSSService = 2 // rpc_gss_svc_integrity: krb5i
	GSSServicePrivacy   GSSService = 3 // rpc_gss_svc_privacy: krb5p
)

// GSSVersion1 is RPCSEC_GSS_VERS_1, the only version defined.
const GSSVersion1 = 1

// GSSCred is the body of an RPCSEC_GSS credential (RFC 2203 §5):
//
//	union rpc_gss_cred_t switch (unsigned int version) {
//	case RPCSEC_GSS_VERS_1:
//	    struct {
//	        rpc_gss_proc_t    gss_proc;
//	        unsigned int      seq_num;
//	        rpc_gss_service_t service;
//	        opaque            handle<>;
//	    } rpc_gss_cred_vers_1_t;
//	};
//
// Handle is a sub-slice of the credential body.
type GSSCred struct {
	Version uint32
	Proc    GSSProc
	SeqNum  uint32
	Service GSSService
	Handle  []byte
}

// ParseGSSCred decodes the body of an RPCSEC_GSS credential. Offsets in
// errors are relative to the start of the body.
func ParseGSSCred(body []byte) (GSSCred, error) {
	var c GSSCred
	d := xdr.NewDecoder(body)
	field := func(name string) (uint32, int, error) {
		at := d.Offset()
		v, err := d.Uint32()
		if err != nil {
			return 0, at, &HeaderError{Field: name, Offset: at, Err: err}
		}
		return v, at, nil
	}
	v, at, err := field("gss version")
	if err != nil {
		return c, err
	}
	if v != GSSVersion1 {
		return c, &HeaderError{Field: "gss version", Offset: at, Value: v, Err: ErrBadGSSVersion}
	}
	c.Version = v
	if v, at, err = field("gss_proc"); err != nil {
		return c, err
	}
	if v > uint32(GSSProcDestroy) {
		return c, &HeaderError{Field: "gss_proc", Offset: at, Value: v, Err: ErrBadGSSProc}
	}
	c.Proc = GSSProc(v)
	if c.SeqNum, _, err = field("gss seq_num"); err != nil {
		return c, err
	}
	if v, at, err = field("gss service"); err != nil {
		return c, err
	}
	if v < uint32(GSSServiceNone) || v > uint32(GSSServicePrivacy) {
		return c, &HeaderError{Field: "gss service", Offset: at, Value: v, Err: ErrBadGSSService}
	}
	c.Service = GSSService(v)
	at = d.Offset()
	if c.Handle, err = d.Opaque(-1); err != nil {
		return c, &HeaderError{Field: "gss handle", Offset: at, Err: err}
	}
	return c, nil
}

// BodyWrapped reports whether the call's arguments (and the reply's
// results) are wrapped by the GSS service: a DATA request under
// integrity (krb5i) or privacy (krb5p). A wrapped body is checksummed or
// encrypted as a whole, so its payloads must stay inline: no Direct Data
// Placement.
func (c *GSSCred) BodyWrapped() bool {
	return c.Proc == GSSProcData &&
		(c.Service == GSSServiceIntegrity || c.Service == GSSServicePrivacy)
}

// GSSBodyWrapped reports whether a call with credential cred has its body
// wrapped by RPCSEC_GSS integrity or privacy (see GSSCred.BodyWrapped). It
// is false, nil for other flavors, and an error for a malformed RPCSEC_GSS
// credential.
func GSSBodyWrapped(cred OpaqueAuth) (bool, error) {
	if cred.Flavor != RPCSecGSS {
		return false, nil
	}
	c, err := ParseGSSCred(cred.Body)
	if err != nil {
		return false, err
	}
	return c.BodyWrapped(), nil
}
