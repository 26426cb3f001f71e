package ulb

import "testing"

// ReplyChunkRoom offers a Reply chunk exactly when the estimate, with the
// verifier room, exceeds what the receive buffer holds after the
// transport header.
func TestReplyChunkRoom(t *testing.T) {
	const recv, hdr, maxRoom = 4096, 28, 1 << 20
	for _, c := range []struct {
		inline, verifier int
		unpredictable    bool
		want             int
	}{
		{inline: 4068, want: 0},
		{inline: 4069, want: 2 * (recv - hdr)},
		{inline: 4096, want: 2 * (recv - hdr)},
		{inline: 3700, verifier: MaxVerifierBody, want: 2 * (recv - hdr)},
		{inline: 3668, verifier: MaxVerifierBody, want: 0},
		{inline: 100, unpredictable: true, want: 2 * (recv - hdr)},
		{inline: 9000, verifier: MaxVerifierBody, want: 9400},
		{inline: 2 << 20, want: maxRoom},
	} {
		e := Estimate{Inline: c.inline, Unpredictable: c.unpredictable}
		if got := e.ReplyChunkRoom(recv-hdr, c.verifier, maxRoom); got != c.want {
			t.Errorf("%+v: room %d, want %d", c, got, c.want)
		}
	}
}
