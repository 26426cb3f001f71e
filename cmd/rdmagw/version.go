package main

import (
	"fmt"
	"io"

	"github.com/rdmagw/rdmagw/internal/version"
)

func init() {
	register("version", "print the build version", func(args []string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, version.String())
		return 0
	})
}
