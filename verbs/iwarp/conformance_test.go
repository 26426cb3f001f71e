package iwarp

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs/verbstest"
)

// The provider's documented differences from InfiniBand (see doc in
// provider.go): iWARP has no receiver-not-ready retry, so a Send without
// a posted receive ends the connection.
var quirks = verbstest.Quirks{NoRNRRetry: true}

func TestConformance(t *testing.T) {
	verbstest.Run(t, verbstest.Factory{Provider: New(Config{}), Quirks: quirks})
}

// TestConformanceNoCRC runs the suite without MPA CRCs, the other framing
// a peer may negotiate.
func TestConformanceNoCRC(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: one configuration is enough")
	}
	verbstest.Run(t, verbstest.Factory{Provider: New(Config{DisableCRC: true}), Quirks: quirks})
}

// TestConformanceInline runs the suite with TxGreedy (inline whenever the
// transmit goroutine is parked).
func TestConformanceInline(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: one configuration is enough")
	}
	verbstest.Run(t, verbstest.Factory{Provider: New(Config{TxMode: TxGreedy}), Quirks: quirks})
}

// TestConformanceGoroutine runs the suite with TxGoroutine (the transmit
// goroutine writes everything; TestConformance runs the default,
// TxIdleInline).
func TestConformanceGoroutine(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: one configuration is enough")
	}
	verbstest.Run(t, verbstest.Factory{Provider: New(Config{TxMode: TxGoroutine}), Quirks: quirks})
}

func BenchmarkRDMA(b *testing.B) {
	verbstest.Bench(b, verbstest.Factory{Provider: New(Config{})})
}
