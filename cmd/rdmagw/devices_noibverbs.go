//go:build !ibverbs

package main

import (
	"fmt"
	"io"
	"strings"
)

func init() {
	register("devices", "list RDMA devices (this build: the pure-Go iWARP device only)", func(args []string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, "this rdmagw has no ibverbs provider (build with -tags ibverbs: make build-ibverbs);")
		fmt.Fprintln(stdout, "the pure-Go provider serves every interface:")
		d := iwarpDevice
		fmt.Fprintf(stdout, "%-12s %-8s %-11s %s\n", d.Name, d.Provider, d.Transport, strings.Join(d.Netdevs, ","))
		return 0
	})
}
