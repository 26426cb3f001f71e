// Package version holds the build's version, set by the linker:
//
//	go build -ldflags "-X github.com/rdmagw/rdmagw/internal/version.Version=v0.1.0"
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version; "dev" for untagged builds.
var Version = "dev"

// String describes the build: version, VCS revision when known, Go version.
func String() string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
			if s.Key == "vcs.modified" && s.Value == "true" {
				rev += "+dirty"
			}
		}
	}
	return fmt.Sprintf("rdmagw %s%s (%s %s/%s)", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
