package gateway

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"
)

// The backchannel section parses over its defaults and reaches the engine.
func TestBackchannelConfigParse(t *testing.T) {
	def := DefaultConfig()
	if def.Backchannel != (BackchannelConfig{MaxCalls: 8, Queue: 64, Timeout: 2 * time.Minute}) {
		t.Fatalf("default backchannel = %+v", def.Backchannel)
	}
	if got := def.ResponderBackchannel(); got.MaxCalls != 8 || got.Timeout != 2*time.Minute {
		t.Fatalf("default engine backchannel = %+v", got)
	}

	cfg, err := ParseConfig([]byte("backchannel:\n  max_calls: 16\n  queue: 200\n  timeout: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (BackchannelConfig{MaxCalls: 16, Queue: 200, Timeout: 30 * time.Second}); cfg.Backchannel != want {
		t.Fatalf("backchannel = %+v, want %+v", cfg.Backchannel, want)
	}
	if got := cfg.ResponderBackchannel(); got.MaxCalls != 16 || got.Timeout != 30*time.Second {
		t.Fatalf("engine backchannel = %+v", got)
	}

	// A field left out keeps its default.
	cfg, err = ParseConfig([]byte("backchannel: {queue: 5}\n"))
	if err != nil || cfg.Backchannel.Queue != 5 || cfg.Backchannel.MaxCalls != DefaultBackchannelCalls ||
		cfg.Backchannel.Timeout != DefaultBackchannelTimeout || cfg.Backchannel.Disabled {
		t.Fatalf("backchannel = %+v, %v", cfg.Backchannel, err)
	}

	// Disabled: the engine posts no receives for backward replies.
	cfg, err = ParseConfig([]byte("backchannel: {disabled: true}\n"))
	if err != nil || !cfg.Backchannel.Disabled {
		t.Fatalf("disabled: %+v, %v", cfg.Backchannel, err)
	}
	if got := cfg.ResponderBackchannel(); got.MaxCalls >= 0 {
		t.Fatalf("disabled engine backchannel = %+v, want MaxCalls < 0", got)
	}

	// The reverse defaults carry the same (unread) section.
	if rev := DefaultConfigFor("reverse"); rev.Backchannel != DefaultBackchannel {
		t.Fatalf("reverse backchannel = %+v", rev.Backchannel)
	}

	// A Config built in code with no backchannel section gets the defaults.
	var zero Config
	if got := zero.ResponderBackchannel(); got.MaxCalls != 8 || got.Timeout != 2*time.Minute || got.OnReply != nil {
		t.Fatalf("zero Config engine backchannel = %+v", got)
	}
}

// Bad backchannel values fail at start naming the field.
func TestBackchannelConfigRejects(t *testing.T) {
	for _, tc := range []struct{ yaml, field, reason string }{
		{"backchannel: {max_calls: 0}", "backchannel.max_calls", "between 1 and 256 (got 0)"},
		{"backchannel: {max_calls: -1}", "backchannel.max_calls", "between 1 and 256"},
		{"backchannel: {max_calls: 257}", "backchannel.max_calls", "between 1 and 256"},
		{"backchannel: {queue: 0}", "backchannel.queue", "between 1 and 4096 (got 0)"},
		{"backchannel: {queue: 5000}", "backchannel.queue", "between 1 and 4096"},
		{"backchannel: {timeout: 0s}", "backchannel.timeout", "more than 1ms"},
		{"backchannel: {timeout: -5s}", "backchannel.timeout", "more than 1ms"},
		{"mode: reverse\nbackchannel: {queue: 0}", "backchannel.queue", "between 1 and 4096"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%q: err %v, want a FieldError for %s", tc.yaml, err, tc.field)
			continue
		}
		if !strings.Contains(err.Error(), "config: "+tc.field+": ") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: %v, want %s: ...%s...", tc.yaml, err, tc.field, tc.reason)
		}
	}
	for _, bad := range []string{"backchannel: {max_call: 4}", "backchannel: {timeout: 5}", "backchannel: {disabled: maybe}"} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// All three problems are reported at once.
	_, err := ParseConfig([]byte("backchannel: {max_calls: 0, queue: 0, timeout: 0s}"))
	for _, f := range []string{"backchannel.max_calls", "backchannel.queue", "backchannel.timeout"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("err %v does not name %s", err, f)
		}
	}
}

// The backchannel metrics exist from the start (not from the first
// session), in both modes with every error reason at 0.
func TestBackchannelMetricsRegisteredAtStart(t *testing.T) {
	for _, mode := range []string{"forward", "reverse"} {
		m := NewMetricsFor(mode)
		fams, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string][]string{}
		for _, f := range fams {
			if !strings.HasPrefix(f.GetName(), "rdmagw_backchannel_") {
				continue
			}
			for _, s := range f.GetMetric() {
				if v := s.GetCounter().GetValue(); v != 0 {
					t.Errorf("%s: %s = %v at start", mode, f.GetName(), v)
				}
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["mode"] != mode {
					t.Errorf("%s: %s has mode %q", mode, f.GetName(), labels["mode"])
				}
				seen[f.GetName()] = append(seen[f.GetName()], labels["reason"])
			}
		}
		for _, n := range []string{"rdmagw_backchannel_calls_total", "rdmagw_backchannel_replies_total"} {
			if len(seen[n]) != 1 {
				t.Errorf("%s: %s: %d series, want 1", mode, n, len(seen[n]))
			}
		}
		reasons := seen["rdmagw_backchannel_errors_total"]
		sort.Strings(reasons)
		want := append([]string(nil), bcErrorReasons...)
		sort.Strings(want)
		if strings.Join(reasons, ",") != strings.Join(want, ",") {
			t.Errorf("%s: errors_total reasons %v, want %v", mode, reasons, want)
		}
		// The engine's "closed" is counted as client_gone.
		bc := m.Backchannel()
		bc.BackwardError("closed")
		bc.BackwardCall(100)
		bc.BackwardReply(50)
		if v := bcCounterValue(t, m, "rdmagw_backchannel_errors_total", "client_gone"); v != 1 {
			t.Errorf("%s: client_gone = %v after a closed error", mode, v)
		}
	}
}

// bcCounterValue is the value of name's series whose reason is reason.
func bcCounterValue(t *testing.T, m *Metrics, name, reason string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
