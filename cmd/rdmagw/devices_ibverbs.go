//go:build ibverbs

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/ibverbs"
)

func init() {
	register("devices", "list RDMA devices and their network interfaces", func(args []string, stdout, stderr io.Writer) int {
		devs, err := ibverbs.ListDevices()
		if err != nil {
			fmt.Fprintf(stderr, "rdmagw devices: %v\n", err)
			return 1
		}
		printDevices(stdout, devs)
		if len(devs) == 0 {
			fmt.Fprintln(stdout, "(no RDMA devices: load a driver, e.g. `rdma link add rxe0 type rxe netdev eth0`)")
		}
		printDevices(stdout, []verbs.DeviceInfo{iwarpDevice})
		return 0
	})
}

func printDevices(w io.Writer, devs []verbs.DeviceInfo) {
	for _, d := range devs {
		netdevs := strings.Join(d.Netdevs, ",")
		if netdevs == "" {
			netdevs = "-"
		}
		fmt.Fprintf(w, "%-12s %-8s %-11s %s\n", d.Name, d.Provider, d.Transport, netdevs)
	}
}
