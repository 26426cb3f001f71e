package gateway

import (
	"fmt"
	"slices"

	"github.com/rdmagw/rdmagw/rdmarpc"
)

// The RPC-over-RDMA versions (draft-ietf-nfsv4-rpcrdma-version-two-07)
// the gateway speaks on its RDMA side:
//
//	forward  rdma.versions         versions accepted from clients; with 2
//	                               listed the engine serves version two
//	                               besides one (rdmarpc.ResponderConfig.V2)
//	                               and each connection's first message
//	                               decides: a Linux client (version one
//	                               only) sees exactly what it saw before
//	reverse  backend.rdma_version  auto, 1 or 2 (rdmarpc.RequesterConfig.
//	                               Version); auto remembers a version-one
//	                               server per address, so a reconnect does
//	                               not negotiate again
//
// Both apply to the RDMA connections made after a reload; connected ones
// keep the version they settled on.

// DefaultVersions is rdma.versions' default: both versions.
var DefaultVersions = []int{int(rdmarpc.Version), int(rdmarpc.V2Version)}

// DefaultRDMAVersion is backend.rdma_version's default.
const DefaultRDMAVersion = "auto"

// ServesV2 reports whether rdma.versions accepts version two from
// clients (forward mode).
func (c *Config) ServesV2() bool { return slices.Contains(c.RDMA.Versions, int(rdmarpc.V2Version)) }

// BackendVersionMode is backend.rdma_version for the requester (reverse
// mode); Validate has checked it.
func (c *Config) BackendVersionMode() rdmarpc.VersionMode {
	m, err := rdmarpc.ParseVersionMode(c.Backend.RDMAVersion)
	if err != nil {
		return rdmarpc.VersionAuto
	}
	return m
}

// validateVersions checks rdma.versions (read in forward mode, checked in
// both so a shared file stays valid) and, in reverse mode,
// backend.rdma_version.
func (c *Config) validateVersions(bad func(string, string, ...any)) {
	vs := c.RDMA.Versions
	seen := map[int]bool{}
	for i, v := range vs {
		switch {
		case v != int(rdmarpc.Version) && v != int(rdmarpc.V2Version):
			bad(fmt.Sprintf("rdma.versions[%d]", i), "must be 1 or 2 (got %d)", v)
		case seen[v]:
			bad(fmt.Sprintf("rdma.versions[%d]", i), "version %d listed twice", v)
		}
		seen[v] = true
	}
	if !seen[int(rdmarpc.Version)] {
		// Every Linux client speaks version one only, and a responder
		// cannot turn version one away (ERR_VERS names the versions it
		// speaks): the engine always serves it.
		bad("rdma.versions", "must include 1: version one is always served, the Linux client speaks only it (got %v)", vs)
	}
	if c.Mode != "reverse" {
		return
	}
	if _, err := rdmarpc.ParseVersionMode(c.Backend.RDMAVersion); err != nil {
		bad("backend.rdma_version", `must be "auto", "1" or "2" (got %q)`, c.Backend.RDMAVersion)
	}
}
