package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Reload (SIGHUP, systemctl reload): Reconfigure takes a new, validated
// configuration and applies what can change without dropping a client.
//
// The contract, for whoever adds a setting:
//   - live fields take effect at once for every client (applyLive);
//   - connection fields take effect for the client connections made
//     after the reload; connected clients keep the values they started
//     with (a Config, once published, is never modified: sessions hold a
//     pointer to theirs);
//   - every other field keeps its running value until a restart, and the
//     reload says so (ReloadResult.NeedRestart, a warning in the log).
//
// A new setting is restart-only until it is listed in liveFields or
// connFields (forward) / reverseConnFields (reverse); list it there and,
// for a live one, apply it in applyLive.

// liveFields change at once, in both modes.
var liveFields = []string{"log.level", "listen.allowed_networks", "metrics.sessions", "shutdown.drain_timeout"}

// ReloadResult says what a reload changed, by field path (as in the YAML).
type ReloadResult struct {
	Applied        []string `json:"applied"`         // in force for every client now
	NewConnections []string `json:"new_connections"` // in force for clients connecting from now on
	NeedRestart    []string `json:"need_restart"`    // changed in the file, still running with the old value
}

// Changed reports whether the file differed from the running configuration.
func (r ReloadResult) Changed() bool {
	return len(r.Applied)+len(r.NewConnections)+len(r.NeedRestart) > 0
}

// LiveConfig is what a reload changes in a running gateway.
type LiveConfig struct {
	mu      sync.Mutex // one reload at a time
	cur     atomic.Pointer[Config]
	allowed atomic.Pointer[[]netip.Prefix]
}

func (l *LiveConfig) Init(cfg *Config) {
	l.cur.Store(cfg)
	l.setAllowed(cfg.Listen.AllowedNetworks)
}

func (l *LiveConfig) setAllowed(nets []string) {
	var ps []netip.Prefix
	for _, n := range nets {
		ps = append(ps, netip.MustParsePrefix(n).Masked())
	}
	l.allowed.Store(&ps)
}

// Current is the configuration for a connection made now.
func (l *LiveConfig) Current() *Config { return l.cur.Load() }

// Allows reports whether a client at a may connect: its IP lies in one
// of listen.allowed_networks, or the list is empty. Both modes ask it, at
// accept and when a reload narrows the list (outsideAllowed).
func (l *LiveConfig) Allows(a net.Addr) bool {
	allowed := *l.allowed.Load()
	if len(allowed) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range allowed {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Reconfigure merges next into the running configuration (fields of
// live and conn; the rest keep their running values), validates the
// result and publishes it; apply puts the live fields in force.
func (l *LiveConfig) Reconfigure(next *Config, conn []string, apply func(*Config)) (ReloadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur.Load()
	if err := next.Validate(); err != nil { // LoadConfig did; a caller may not have
		return ReloadResult{}, err
	}
	if next.Mode != old.Mode {
		return ReloadResult{}, &FieldError{Field: "mode", Reason: fmt.Sprintf("cannot change from %q to %q on reload (restart)", old.Mode, next.Mode)}
	}
	merged := *old
	var res ReloadResult
	for _, path := range configDiff(old, next) {
		switch {
		case matchField(path, liveFields):
			res.Applied = append(res.Applied, path)
		case matchField(path, conn):
			res.NewConnections = append(res.NewConnections, path)
		default:
			res.NeedRestart = append(res.NeedRestart, path)
			continue
		}
		setField(&merged, next, path)
	}
	if err := merged.Validate(); err != nil {
		return ReloadResult{}, err
	}
	l.cur.Store(&merged)
	apply(&merged)
	return res, nil
}

// ApplyLive puts the live fields of cfg in force.
func (l *LiveConfig) ApplyLive(cfg *Config, log hclog.Logger, ms *MetricsServer) {
	log.SetLevel(hclog.LevelFromString(cfg.Log.Level))
	l.setAllowed(cfg.Listen.AllowedNetworks)
	if ms != nil {
		ms.sessionsOn.Store(cfg.Metrics.Sessions)
	}
}

// logReload logs what a reload did, and which clients now connected lie
// outside listen.allowed_networks (they are kept: a reload never
// disconnects anyone; drain or restart to be rid of them).
func logReload(log hclog.Logger, res ReloadResult, outside []string) {
	log.Info("configuration reloaded", "applied", res.Applied, "new_connections", res.NewConnections)
	if len(res.NeedRestart) > 0 {
		log.Warn("configuration reloaded; these changes need a restart and are not in force", "fields", res.NeedRestart)
	}
	if len(outside) > 0 {
		log.Warn("connected clients outside the new listen.allowed_networks are kept until they disconnect", "clients", outside)
	}
}

// OutsideAllowed lists the connected clients the allowed networks would
// now refuse.
func (t *ClientTable) OutsideAllowed(l *LiveConfig) []string {
	var out []string
	now := time.Now()
	for _, c := range t.List() {
		peer := c.Info(now).Peer
		if !l.Allows(peerAddr(peer)) {
			out = append(out, peer)
		}
	}
	return out
}

// peerAddr is a client's "ip:port" as a net.Addr.
type peerAddr string

func (a peerAddr) Network() string { return "" }
func (a peerAddr) String() string  { return string(a) }

// ReloadRejected counts and logs a reload whose file could not be loaded
// (LoadConfig's error): nothing changed.
func (m *Metrics) ReloadRejected(log hclog.Logger, err error) {
	m.ops.reloads.WithLabelValues("rejected").Inc()
	log.Error("configuration reload rejected; running configuration unchanged", "error", err)
}

func (m *Metrics) Reloaded(log hclog.Logger, res ReloadResult, err error, outside []string) (ReloadResult, error) {
	if err != nil {
		m.ReloadRejected(log, err)
		return res, err
	}
	m.ops.reloads.WithLabelValues("applied").Inc()
	logReload(log, res, outside)
	return res, nil
}

// configDiff lists the YAML paths of the leaves that differ between a
// and b (a slice or map is one leaf).
func configDiff(a, b *Config) []string {
	var out []string
	var walk func(va, vb reflect.Value, prefix string)
	walk = func(va, vb reflect.Value, prefix string) {
		if va.Kind() != reflect.Struct {
			if !reflect.DeepEqual(va.Interface(), vb.Interface()) {
				out = append(out, prefix)
			}
			return
		}
		for i := range va.NumField() {
			f := va.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				name = strings.ToLower(f.Name)
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			walk(va.Field(i), vb.Field(i), p)
		}
	}
	walk(reflect.ValueOf(*a), reflect.ValueOf(*b), "")
	return out
}

// setField copies the field at path from src to dst.
func setField(dst, src *Config, path string) {
	vd, vs := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for _, name := range strings.Split(path, ".") {
		for i := range vd.NumField() {
			tag, _, _ := strings.Cut(vd.Type().Field(i).Tag.Get("yaml"), ",")
			if tag == name || tag == "" && strings.ToLower(vd.Type().Field(i).Name) == name {
				vd, vs = vd.Field(i), vs.Field(i)
				break
			}
		}
	}
	vd.Set(vs)
}

// matchField reports whether path is one of fields, or under one of
// them that ends with '.'.
func matchField(path string, fields []string) bool {
	for _, f := range fields {
		if path == f || strings.HasSuffix(f, ".") && strings.HasPrefix(path, f) {
			return true
		}
	}
	return false
}
