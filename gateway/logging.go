package gateway

import (
	"io"

	"github.com/hashicorp/go-hclog"
)

// NewLogger builds the gateway's logger from the log section: level and
// text or JSON format, writing to w.
func NewLogger(c LogConfig, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "rdmagw",
		Level:      hclog.LevelFromString(c.Level),
		JSONFormat: c.Format == "json",
		Output:     w,
	})
}
