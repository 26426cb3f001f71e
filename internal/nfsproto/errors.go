package nfsproto

import "errors"

// errBadEnum: an enum or discriminant outside its definition.
var errBadEnum = errors.New("nfsproto: enum value out of range")

// ErrBadEnum is errBadEnum for callers that validate their own enums.
var ErrBadEnum = errBadEnum
