package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// The shipped example documents the defaults: loading it must give
// exactly DefaultConfig.
func TestShippedForwardYAMLIsTheDefaults(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "configs", "forward.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	// The file writes allowed_networks: [] explicitly.
	if len(cfg.Listen.AllowedNetworks) != 0 {
		t.Fatalf("allowed_networks = %v", cfg.Listen.AllowedNetworks)
	}
	cfg.Listen.AllowedNetworks = nil
	if !reflect.DeepEqual(*cfg, def) {
		t.Fatalf("configs/forward.yaml differs from DefaultConfig:\n got %+v\nwant %+v", *cfg, def)
	}
}

// Every field of Config appears in the shipped file with a comment above
// it, so the file documents the whole configuration.
func TestShippedForwardYAMLDocumentsEveryField(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "configs", "forward.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for i := 0; i < tp.NumField(); i++ {
			f := tp.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !strings.Contains(text, "\n"+strings.Repeat(" ", strings.Count(path, ".")*2)+name+":") {
				t.Errorf("configs/forward.yaml has no line for %s%s", path, name)
			}
			if !strings.Contains(text, name) {
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(f.Type, path+name+".")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	// Every key that carries a value has a comment block above it (key
	// lines of the same group may sit between) that names it.
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, "-") {
			continue
		}
		key, value, _ := strings.Cut(trim, ":")
		if strings.TrimSpace(value) == "" && strings.Count(line, " ") == 0 {
			continue // a top-level section header
		}
		found := false
		for j := i - 1; j >= 0; j-- {
			prev := strings.TrimSpace(lines[j])
			if prev == "" {
				break
			}
			if strings.HasPrefix(prev, "#") && strings.Contains(prev, key) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("configs/forward.yaml line %d: %q has no comment naming it", i+1, key)
		}
	}
}

func TestParseConfigSizesAndDurations(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
backend:
  address: nfs.example
  port: 12049
  connect_timeout: 250ms
  give_up_after: 2m
rdma:
  credits: 32
  inline_recv: 8KiB
  inline_send: 1024
pool:
  max_bytes: 1GiB
listen:
  allowed_networks: [10.0.0.0/8, "fd00::/8"]
metrics:
  listen: ""
log:
  level: DEBUG
  format: json
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backend.Address != "nfs.example" || cfg.Backend.Port != 12049 ||
		cfg.Backend.ConnectTimeout != 250*time.Millisecond || cfg.Backend.GiveUpAfter != 2*time.Minute {
		t.Errorf("backend = %+v", cfg.Backend)
	}
	if cfg.RDMA.Credits != 32 || cfg.RDMA.InlineRecv != 8192 || cfg.RDMA.InlineSend != 1024 {
		t.Errorf("rdma = %+v", cfg.RDMA)
	}
	if cfg.Pool.MaxBytes != 1<<30 || cfg.Metrics.Listen != "" || cfg.Log.Format != "json" {
		t.Errorf("pool/metrics/log = %+v %+v %+v", cfg.Pool, cfg.Metrics, cfg.Log)
	}
	// Untouched fields keep their defaults.
	if cfg.Listen.Port != DefaultListenPort || cfg.RDMA.MaxReadsOutstanding != DefaultReadsInFlight {
		t.Errorf("defaults lost: %+v", cfg)
	}
}

// Each invalid config names the offending field and says why.
func TestParseConfigRejects(t *testing.T) {
	cases := []struct {
		name, yaml, field, reason string
	}{
		{"unknown top-level field", "bogus: 1\n", "", "field bogus not found"},
		{"unknown nested field", "backend:\n  adress: x\n", "", "field adress not found"},
		{"two documents", "mode: forward\n---\nmode: forward\n", "", "more than one YAML document"},
		{"mode", "mode: sideways\n", "mode", "must be"},
		{"reverse provider", "mode: reverse\nbackend:\n  provider: tcp\n", "backend.provider", "must be"},
		{"reverse local address", "mode: reverse\nbackend:\n  local_address: here\n", "backend.local_address", "IP address"},
		{"reverse calls per client", "mode: reverse\nreverse:\n  max_calls_per_client: 0\n", "reverse.max_calls_per_client", "between 1 and 4096"},
		{"reverse ping interval", "mode: reverse\nreverse:\n  ping_interval: -1s\n", "reverse.ping_interval", "positive"},
		{"reverse ping timeout", "mode: reverse\nreverse:\n  ping_timeout: 0s\n", "reverse.ping_timeout", "more than 1ms"},
		{"reverse retries", "mode: reverse\nreverse:\n  reply_chunk_retries: 9\n", "reverse.reply_chunk_retries", "between 0 and 8"},
		{"listen address", "listen:\n  address: nowhere\n", "listen.address", "IP address"},
		{"listen port negative", "listen:\n  port: -1\n", "listen.port", "between 0 and 65535"},
		{"listen port big", "listen:\n  port: 70000\n", "listen.port", "between 0 and 65535"},
		{"provider", "listen:\n  provider: efa\n", "listen.provider", `"iwarp" or "ibverbs"`},
		{"cidr", "listen:\n  allowed_networks: [10.0.0.0/33]\n", "listen.allowed_networks[0]", "CIDR"},
		{"backend address", "backend:\n  address: \"\"\n", "backend.address", "must name"},
		{"backend port", "backend:\n  port: -1\n", "backend.port", "between 1 and 65535"},
		{"connect timeout", "backend:\n  connect_timeout: 0s\n", "backend.connect_timeout", "more than"},
		{"duration without unit", "backend:\n  connect_timeout: 5\n", "", "cannot unmarshal"},
		{"backoff order", "backend:\n  reconnect_backoff_initial: 10s\n  reconnect_backoff_max: 1s\n", "backend.reconnect_backoff_max", "at least"},
		{"give up", "backend:\n  give_up_after: -1s\n", "backend.give_up_after", "more than"},
		{"policy", "backend:\n  connection_policy: shared\n", "backend.connection_policy", "per_client"},
		{"max reply", "backend:\n  max_reply_bytes: 100\n", "backend.max_reply_bytes", "between"},
		{"credits zero", "rdma:\n  credits: 0\n", "rdma.credits", "between 1 and 4096"},
		{"credits huge", "rdma:\n  credits: 100000\n", "rdma.credits", "between 1 and 4096"},
		{"inline recv odd", "rdma:\n  inline_recv: 5000\n", "rdma.inline_recv", "multiple of 1KiB"},
		{"inline send small", "rdma:\n  inline_send: 512\n", "rdma.inline_send", "multiple of 1KiB"},
		{"reads", "rdma:\n  max_reads_outstanding: 0\n", "rdma.max_reads_outstanding", "between"},
		{"mpa crc ibverbs", "listen:\n  provider: ibverbs\nrdma:\n  mpa_crc: false\n", "rdma.mpa_crc", "iwarp provider only"},
		{"mpa crc reverse ibverbs", "mode: reverse\nbackend:\n  provider: ibverbs\nrdma:\n  mpa_crc: false\n", "rdma.mpa_crc", "iwarp provider only"},
		{"send completion", "rdma:\n  send_completion: ack\n", "rdma.send_completion", `must be "placement" or "transmit"`},
		{"send completion ibverbs", "listen:\n  provider: ibverbs\nrdma:\n  send_completion: placement\n", "rdma.send_completion", "iwarp provider only"},
		{"send completion reverse ibverbs", "mode: reverse\nbackend:\n  provider: ibverbs\nrdma:\n  send_completion: transmit\n", "rdma.send_completion", "iwarp provider only"},
		// RFC 8267 §6.4.2's floors, one below each and the old zeroes.
		{"limit segs", "rdma:\n  limits:\n    max_read_segments: 0\n", "rdma.limits.max_read_segments", "at least 32"},
		{"limit segs 31", "rdma:\n  limits:\n    max_read_segments: 31\n", "rdma.limits.max_read_segments", "RFC 8267 §6.4.2"},
		{"limit chunks", "rdma:\n  limits:\n    max_read_chunks: -2\n", "rdma.limits.max_read_chunks", "at least 2"},
		{"limit chunks 1", "rdma:\n  limits:\n    max_read_chunks: 1\n", "rdma.limits.max_read_chunks", "Position-Zero Read chunk plus one"},
		{"limit writes", "rdma:\n  limits:\n    max_write_chunks: 0\n", "rdma.limits.max_write_chunks", "at least 1"},
		{"limit per chunk", "rdma:\n  limits:\n    max_segments_per_chunk: 0\n", "rdma.limits.max_segments_per_chunk", "at least 16"},
		{"limit per chunk 15", "rdma:\n  limits:\n    max_segments_per_chunk: 15\n", "rdma.limits.max_segments_per_chunk", "16 segments"},
		{"reverse read chunks", "mode: reverse\nreverse:\n  max_read_chunks: 0\n", "reverse.max_read_chunks", "between 1 and 8"},
		{"reverse write chunks", "mode: reverse\nreverse:\n  max_write_chunks: 9\n", "reverse.max_write_chunks", "between 1 and 8"},
		{"limit bytes", "rdma:\n  limits:\n    max_chunk_bytes: 1KiB\n", "rdma.limits.max_chunk_bytes", "at least 4KiB"},
		{"bad size", "pool:\n  max_bytes: lots\n", "", "bad size"},
		{"pool small", "pool:\n  max_bytes: 1MiB\n", "pool.max_bytes", "two buffers"},
		{"pool classes order", "pool:\n  classes: [64KiB, 4KiB]\n", "pool.classes[1]", "ascend"},
		{"pool classes empty", "pool:\n  classes: []\n", "pool.classes", "at least one"},
		{"pool slab", "pool:\n  slab_bytes: 64KiB\n", "pool.slab_bytes", "at least one buffer"},
		{"metrics", "metrics:\n  listen: nine-four-six-four\n", "metrics.listen", "host:port"},
		{"pprof without metrics", "metrics:\n  listen: \"\"\n  pprof: true\n", "metrics.pprof", "metrics.listen"},
		{"log level", "log:\n  level: loud\n", "log.level", "trace, debug"},
		{"log format", "log:\n  format: xml\n", "log.format", `"text" or "json"`},
		{"runtime procs negative", "runtime:\n  procs: -1\n", "", `procs must be auto or a number of threads, 0 for Go's default (got "-1")`},
		{"runtime procs huge", "runtime:\n  procs: 1025\n", "runtime.procs", "must be auto, 0 (Go's default) or a thread count up to 1024 (got 1025)"},
		{"runtime procs word", "runtime:\n  procs: many\n", "", "procs must be auto or a number of threads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q does not say %q", err, c.reason)
			}
			if c.field == "" {
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("error %q: want field %q", err, c.field)
			}
			if !strings.Contains(err.Error(), "config: "+c.field+": ") {
				t.Fatalf("error %q does not start with the field name", err)
			}
		})
	}
}

func TestParseConfigReportsAllErrors(t *testing.T) {
	_, err := ParseConfig([]byte("listen:\n  port: -1\nbackend:\n  port: 0\n"))
	if err == nil || !strings.Contains(err.Error(), "listen.port") || !strings.Contains(err.Error(), "backend.port") {
		t.Fatalf("err = %v; want both ports named", err)
	}
}

// runtime.procs takes auto, 0 (Go's default) or a thread count, and
// writes auto back as the word.
func TestParseConfigRuntimeProcs(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want Procs
	}{
		{"runtime:\n  procs: auto\n", ProcsAuto},
		{"runtime:\n  procs: 0\n", 0},
		{"runtime:\n  procs: 3\n", 3},
	} {
		cfg, err := ParseConfig([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if cfg.Runtime.Procs != c.want {
			t.Errorf("%q: procs %v, want %v", c.yaml, cfg.Runtime.Procs, c.want)
		}
	}
	out, err := yaml.Marshal(RuntimeConfig{Procs: ProcsAuto})
	if err != nil || string(out) != "procs: auto\n" {
		t.Errorf("marshalled %q, %v", out, err)
	}
	for in, want := range map[string]Procs{"auto": ProcsAuto, " 2 ": 2, "0": 0} {
		if got, err := ParseProcs(in); err != nil || got != want {
			t.Errorf("ParseProcs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "1025", "x", ""} {
		if _, err := ParseProcs(bad); err == nil {
			t.Errorf("ParseProcs(%q) accepted", bad)
		}
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "4096": 4096, "4KiB": 4096, "4 KiB": 4096, "1M": 1 << 20, "1028KiB": 1028 << 10, "2GiB": 2 << 30, "7B": 7} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "KiB", "1TiB", "99999999999GiB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
	if s := ByteSize(1028 << 10).String(); s != "1028KiB" {
		t.Errorf("String = %s", s)
	}
}

// aux_relay is parsed into the relay's own configuration; enabled with
// no filer.address, the filer is the backend.
func TestParseConfigAuxRelay(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
backend: {address: filer.example, port: 2049}
aux_relay:
  enabled: true
  listen_address: 10.0.0.5
  advertise_address: 10.0.0.5
  rpcbind_port: -1
  mount_port: 635
  udp: false
  nfs_tcp_port: 2049
  filer: {mount_port: 20048, udp: false}
  nlm_caller_name: gw.example
  call_timeout: 30s
  max_record_bytes: 65536
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.AuxRelay
	if !a.Enabled || a.ListenAddress != "10.0.0.5" || a.RPCBindPort != -1 || a.MountPort != 635 || a.UDP ||
		a.NFSTCPPort != 2049 || a.NLMCallerName != "gw.example" || a.CallTimeout != 30*time.Second {
		t.Errorf("aux_relay = %+v", a)
	}
	if a.Filer.Address != "filer.example" || a.Filer.MountPort != 20048 || a.Filer.UDP || a.Filer.RPCBindPort != 111 {
		t.Errorf("aux_relay.filer = %+v, want address from backend.address and rpcbind_port 111", a.Filer)
	}
	// Untouched fields keep the relay's defaults.
	if a.NFSRDMAPort != 20049 || a.ClientRPCBindPort != 111 || a.RouteTTL != time.Hour {
		t.Errorf("aux_relay defaults lost: %+v", a)
	}
	// An explicit filer.address wins over backend.address.
	cfg, err = ParseConfig([]byte("backend: {address: a.example}\naux_relay: {enabled: true, filer: {address: b.example}}\n"))
	if err != nil || cfg.AuxRelay.Filer.Address != "b.example" {
		t.Fatalf("filer.address = %q, %v", cfg.AuxRelay.Filer.Address, err)
	}
	// Off by default, and then not checked at all.
	cfg, err = ParseConfig([]byte("aux_relay: {mount_port: 99999}\n"))
	if err != nil || cfg.AuxRelay.Enabled {
		t.Fatalf("disabled relay: enabled=%v err=%v", cfg.AuxRelay.Enabled, err)
	}
}

// Bad aux_relay values fail at start naming the field (the relay's own
// Validate names them; the gateway passes its errors on).
func TestParseConfigAuxRelayErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, field, reason string }{
		{"aux_relay: {enabled: true, listen_address: gw.example}", "aux_relay.listen_address", "must be an IP address"},
		{"aux_relay: {enabled: true, advertise_address: 0.0.0.0}", "aux_relay.advertise_address", "specific IP"},
		{"aux_relay: {enabled: true, rpcbind_port: 70000}", "aux_relay.rpcbind_port", "0..65535"},
		{"aux_relay: {enabled: true, mount_port: 4000, nlm_port: 4000}", "aux_relay.nlm_port", "already mount_port"},
		{"aux_relay: {enabled: true, nsm_port: -2}", "aux_relay.nsm_port", "0..65535"},
		{"aux_relay: {enabled: true, filer: {nlm_port: 65536}}", "aux_relay.filer.nlm_port", "0..65535"},
		{"aux_relay: {enabled: true, filer: {rpcbind_port: 0}}", "aux_relay.filer.rpcbind_port", "1..65535"},
		{"aux_relay: {enabled: true, client_rpcbind_port: 0}", "aux_relay.client_rpcbind_port", "1..65535"},
		{"aux_relay: {enabled: true, call_timeout: 0s}", "aux_relay.call_timeout", "at least 1ms"},
		{"aux_relay: {enabled: true, max_record_bytes: 100}", "aux_relay.max_record_bytes", "between 4096"},
		{"backend: {address: \"\"}\naux_relay: {enabled: true}", "aux_relay.filer.address", "must be set"},
		{"mode: reverse\naux_relay: {enabled: true}", "aux_relay.enabled", "forward mode only"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: err %v, want a FieldError for %s", tc.yaml, err, tc.field)
			continue
		}
		if !strings.Contains(err.Error(), "config: "+tc.field+": ") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: %v, want %s: ...%s...", tc.yaml, err, tc.field, tc.reason)
		}
	}
	// An unknown key inside the section is refused with its name.
	if _, err := ParseConfig([]byte("aux_relay: {enabled: true, mnt_port: 635}")); err == nil || !strings.Contains(err.Error(), "mnt_port") {
		t.Errorf("unknown aux_relay field: %v", err)
	}
}

// rdma.mpa_crc and rdma.send_completion choose the pure-Go provider's
// configuration: by default CRCs on, and Sends completed on transmit in
// forward mode, by placement in reverse mode.
func TestIWARPConfig(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want iwarp.Config
	}{
		{"", iwarp.Config{CompleteOnTransmit: true}},
		{"mode: reverse\n", iwarp.Config{}},
		{"mode: reverse\nrdma:\n  send_completion: transmit\n", iwarp.Config{CompleteOnTransmit: true}},
		{"rdma:\n  send_completion: placement\n", iwarp.Config{}},
		{"rdma:\n  send_completion: transmit\n", iwarp.Config{CompleteOnTransmit: true}},
		{"rdma:\n  mpa_crc: false\n  send_completion: transmit\n", iwarp.Config{DisableCRC: true, CompleteOnTransmit: true}},
		{"listen:\n  provider: ibverbs\nrdma:\n  send_completion: transmit\n", iwarp.Config{CompleteOnTransmit: true}},
		{"mode: reverse\nbackend:\n  provider: ibverbs\nrdma:\n  send_completion: placement\n", iwarp.Config{}},
	} {
		cfg, err := ParseConfig([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if got := cfg.RDMA.IWARPConfig(); got != c.want {
			t.Errorf("%q: iwarp config %+v, want %+v", c.yaml, got, c.want)
		}
	}
}

// Provider: the registered pure-Go provider for its zero configuration,
// one of its own for any other; an unknown name is an error whatever the
// configuration.
func TestProvider(t *testing.T) {
	reg, err := verbs.Lookup("iwarp")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Provider("iwarp", iwarp.Config{}); err != nil || p != reg {
		t.Errorf("zero configuration: %v, %v; want the registered provider", p, err)
	}
	p, err := Provider("iwarp", iwarp.Config{CompleteOnTransmit: true})
	if err != nil || p == reg || p.Name() != "iwarp" {
		t.Errorf("CompleteOnTransmit: %v, %v; want an iwarp provider other than the registered one", p, err)
	}
	if _, err := Provider("nosuch", iwarp.Config{DisableCRC: true}); !errors.Is(err, verbs.ErrUnknownProvider) {
		t.Errorf("unknown provider: %v, want ErrUnknownProvider", err)
	}
}
