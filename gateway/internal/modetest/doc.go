// Package modetest holds the tests that run both gateway modes together:
// a reverse gateway in front of a forward gateway in front of
// nfs-ganesha (the chain), the reverse side's carry limits and a server
// cut under it, the chain's benchmark, and the check that every metric
// either mode registers is named in package metricname. It has no code
// of its own; it is the one package that imports both
// gateway/forward and gateway/reverse besides cmd/rdmagw.
package modetest
