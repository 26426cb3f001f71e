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

// TestConformanceCompleteOnTransmit runs the suite with
// Config.CompleteOnTransmit: on the dialing side against a default
// listener (the quirk as the suite describes it, Linux siw's behaviour)
// and on both sides. Sends and Writes are written inline when the
// connection is idle (TxIdleInline) and complete there.
func TestConformanceCompleteOnTransmit(t *testing.T) {
	cot := New(Config{CompleteOnTransmit: true})
	q := verbstest.Quirks{NoRNRRetry: true, CompleteOnTransmit: true}
	t.Run("dialer", func(t *testing.T) {
		verbstest.Run(t, verbstest.Factory{Provider: New(Config{}), Peer: cot, Quirks: q})
	})
	t.Run("both", func(t *testing.T) {
		verbstest.Run(t, verbstest.Factory{Provider: cot, Quirks: q})
	})
}
