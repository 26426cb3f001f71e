// Package deploy holds no Go code: it checks the deployment files beside
// it (Prometheus rules, Grafana dashboard, Kubernetes manifests, systemd
// units) against the gateway's source, so that renaming a metric, a label
// or a label value, or changing a config default, breaks a test instead of
// silently emptying a dashboard panel or disarming an alert.
package deploy

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rdmagw/rdmagw/gateway"
)

// metricInfo is what the source says about one exported series name.
type metricInfo struct {
	labels map[string]bool
}

// catalog is every metric name the module's (non-test) Go source defines,
// with its labels, and every string literal in that source (label values
// such as "ERR_CHUNK" or "callback_unroutable" are string literals).
type catalog struct {
	metrics  map[string]*metricInfo
	literals map[string]bool
}

// Series that come from client_golang's Go and process collectors, which
// gateway/metrics.go registers (checked in loadCatalog), not from our code.
var collectorMetrics = []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "go_goroutines"}

// Labels every scraped series has, set by Prometheus.
var targetLabels = map[string]bool{"instance": true, "job": true, "__name__": true}

// factoryMethods are the gateway's helpers (gateway/metrics.go factory)
// that take the metric name as first argument and label names after it.
var factoryMethods = map[string]string{"counter": "counter", "gauge": "gauge", "counterVec": "counter", "histogram": "histogram"}

func loadCatalog(t *testing.T) *catalog {
	t.Helper()
	c := &catalog{metrics: map[string]*metricInfo{}, literals: map[string]bool{}}
	root := ".."
	fset := token.NewFileSet()
	sawCollectors := 0
	var files []*ast.File
	var paths []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "vendor", "deploy", "e2e", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		collectNameConsts(f)
		files, paths = append(files, f), append(paths, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		path := paths[i]
		// Series registered by package gateway go through a registerer
		// that adds the constant label mode (NewMetricsFor).
		inGateway := filepath.Base(filepath.Dir(path)) == "gateway"
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil {
						c.literals[s] = true
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "NewGoCollector", "NewProcessCollector":
					sawCollectors++
				}
				if kind, ok := factoryMethods[sel.Sel.Name]; ok && len(n.Args) >= 2 {
					name, ok := stringLit(n.Args[0])
					if !ok || !strings.HasPrefix(name, "rdmagw_") {
						return true
					}
					var labels []string
					for _, a := range n.Args[2:] {
						if l, ok := stringLit(a); ok {
							labels = append(labels, l)
						}
					}
					c.add(name, kind, labels, inGateway)
					return true
				}
				// prometheus.NewXxx(prometheus.XxxOpts{...}[, []string{labels}])
				if len(n.Args) == 0 {
					return true
				}
				opts, ok := n.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				name, kind := optsName(opts)
				if name == "" {
					return true
				}
				var labels []string
				if len(n.Args) > 1 {
					if cl, ok := n.Args[1].(*ast.CompositeLit); ok {
						for _, e := range cl.Elts {
							if l, ok := stringLit(e); ok {
								labels = append(labels, l)
							}
						}
					}
				}
				c.add(name, kind, labels, inGateway)
			}
			return true
		})
	}
	if len(c.metrics) < 20 {
		t.Fatalf("found only %d metric names in the source: the scanner no longer understands how metrics are defined", len(c.metrics))
	}
	if sawCollectors < 2 {
		t.Fatalf("the Go and process collectors are no longer registered; %v would be missing", collectorMetrics)
	}
	for _, m := range collectorMetrics {
		c.metrics[m] = &metricInfo{labels: map[string]bool{}}
	}
	return c
}

func (c *catalog) add(name, kind string, labels []string, withMode bool) {
	ls := map[string]bool{}
	for _, l := range labels {
		ls[l] = true
	}
	if withMode {
		ls["mode"] = true
	}
	if kind != "histogram" {
		c.metrics[name] = &metricInfo{labels: ls}
		return
	}
	withLe := map[string]bool{"le": true}
	for l := range ls {
		withLe[l] = true
	}
	c.metrics[name+"_bucket"] = &metricInfo{labels: withLe}
	c.metrics[name+"_sum"] = &metricInfo{labels: ls}
	c.metrics[name+"_count"] = &metricInfo{labels: ls}
}

// optsName reads Namespace, Subsystem and Name of a prometheus.*Opts
// literal and says whether it is a histogram.
func optsName(cl *ast.CompositeLit) (name, kind string) {
	sel, ok := cl.Type.(*ast.SelectorExpr)
	if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
		return "", ""
	}
	parts := map[string]string{}
	for _, e := range cl.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		if s, ok := stringLit(kv.Value); ok {
			parts[k.Name] = s
		}
	}
	if parts["Name"] == "" {
		return "", ""
	}
	var full []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if parts[k] != "" {
			full = append(full, parts[k])
		}
	}
	kind = "other"
	if strings.HasPrefix(sel.Sel.Name, "Histogram") {
		kind = "histogram"
	}
	return strings.Join(full, "_"), kind
}

// stringLit is a string literal's value, or that of a string constant
// named by an identifier or a package selector (metricname.CallsTotal):
// constants are looked up in nameConsts.
func stringLit(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.Ident:
		s, ok := nameConsts[x.Name]
		return s, ok
	case *ast.SelectorExpr:
		s, ok := nameConsts[x.Sel.Name]
		return s, ok
	}
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// nameConsts maps the names of the source's string constants that hold
// metric names ("rdmagw_...": gateway/metricname, gateway/auxrelay) to
// their values; loadCatalog fills it before it scans the registrations.
var nameConsts = map[string]string{}

// collectNameConsts records every constant declared as a "rdmagw_..."
// string literal in f.
func collectNameConsts(f *ast.File) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					break
				}
				if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if v, err := strconv.Unquote(bl.Value); err == nil && strings.HasPrefix(v, "rdmagw_") {
						nameConsts[n.Name] = v
					}
				}
			}
		}
	}
}

// ---- PromQL checks (a scanner, not a parser: promtool parses) ----

var (
	reString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	reIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	reSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)?\{([^}]*)\}`)
	reMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	reGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	rePlainVal = regexp.MustCompile(`^[A-Za-z0-9_ ]+$`)
)

// checkExpr reports every metric, label or label value expr uses that the
// source does not define. recorded are the recording rules' names.
func (c *catalog) checkExpr(t *testing.T, where, expr string, recorded map[string]bool) {
	t.Helper()
	bare := reString.ReplaceAllString(expr, `""`)
	var used []*metricInfo
	usesRecorded := false
	for _, id := range reIdent.FindAllString(bare, -1) {
		switch {
		case strings.Contains(id, ":"):
			usesRecorded = true
			if !recorded[id] {
				t.Errorf("%s: recording rule %q is not defined in rdmagw-rules.yml", where, id)
			}
		case strings.HasPrefix(id, "rdmagw_") || strings.HasPrefix(id, "process_") || strings.HasPrefix(id, "go_"):
			m := c.metrics[id]
			if m == nil {
				t.Errorf("%s: metric %q is not defined anywhere in the Go source", where, id)
				continue
			}
			used = append(used, m)
		}
	}
	for _, sm := range reSelector.FindAllStringSubmatch(expr, -1) {
		name := sm[1]
		if name == "" || name == "up" || name == "ALERTS" || strings.Contains(name, ":") {
			continue
		}
		m := c.metrics[name]
		if m == nil {
			continue // reported above
		}
		for _, mm := range reMatcher.FindAllStringSubmatch(sm[2], -1) {
			label, op, val := mm[1], mm[2], mm[3]
			if targetLabels[label] {
				continue
			}
			if !m.labels[label] {
				t.Errorf("%s: %s has no label %q (it has %v)", where, name, label, keys(m.labels))
				continue
			}
			if strings.HasPrefix(val, "$") {
				continue // a Grafana variable
			}
			vals := []string{val}
			if op == "=~" || op == "!~" {
				vals = strings.Split(val, "|")
			}
			for _, v := range vals {
				if rePlainVal.MatchString(v) && !c.literals[v] {
					t.Errorf("%s: %s{%s%s%q}: no string literal %q in the Go source produces that value", where, name, label, op, val, v)
				}
			}
		}
	}
	if usesRecorded {
		return // its labels are the recording rule's, checked where it is defined
	}
	for _, g := range reGrouping.FindAllStringSubmatch(bare, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || targetLabels[l] {
				continue
			}
			found := false
			for _, m := range used {
				if m.labels[l] {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: groups by label %q that none of its metrics has", where, l)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- Prometheus rules ----

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) *ruleFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/rdmagw-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var rf ruleFile
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("rdmagw-rules.yml: %v", err)
	}
	return &rf
}

var reRecordName = regexp.MustCompile(`^[a-z_]+:rdmagw_[a-z0-9_]+:[a-z0-9_]+$`)

func TestPrometheusRulesUseRealMetrics(t *testing.T) {
	c := loadCatalog(t)
	rf := loadRules(t)
	recorded := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			where := g.Name + "/" + r.Record + r.Alert
			if (r.Record == "") == (r.Alert == "") {
				t.Errorf("%s: a rule is either a record or an alert", where)
			}
			if r.Record != "" && !reRecordName.MatchString(r.Record) {
				t.Errorf("%s: recording rule name does not follow level:metric:operation", where)
			}
			if r.Alert != "" {
				if alerts[r.Alert] {
					t.Errorf("%s: duplicate alert name", where)
				}
				alerts[r.Alert] = true
				switch r.Labels["severity"] {
				case "critical", "warning", "info":
				default:
					t.Errorf("%s: severity label %q is not critical, warning or info", where, r.Labels["severity"])
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("%s: needs summary and description annotations", where)
				}
			}
			c.checkExpr(t, where, r.Expr, recorded)
		}
	}
	// What the storage team asked to be alerted on.
	for _, want := range []string{"RdmagwDown", "RdmagwBackendDown", "RdmagwBackendReconnectStorm",
		"RdmagwBackendGiveUps", "RdmagwErrChunkSent", "RdmagwErrVersSent", "RdmagwRDMAOperationFailures",
		"RdmagwBackendUnknownXIDReplies", "RdmagwPoolNearlyExhausted", "RdmagwCreditsSaturated",
		"RdmagwCallLatencyHigh", "RdmagwAuxRelayCallbackUnroutable"} {
		if !alerts[want] {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// TestPrometheusRulesPromtool runs promtool's syntax check and the rule
// unit tests (prometheus/rdmagw-rules.test.yml) where promtool is installed
// (Debian: apt-get install prometheus).
func TestPrometheusRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus); rule syntax and unit tests not run")
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/rdmagw-rules.yml"},
		{"test", "rules", "prometheus/rdmagw-rules.test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ---- Grafana dashboard ----

func TestGrafanaDashboardUsesRealMetrics(t *testing.T) {
	c := loadCatalog(t)
	b, err := os.ReadFile("grafana/rdmagw-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("rdmagw-dashboard.json: %v", err)
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Error("dashboard needs a uid and a title")
	}
	ids := map[float64]bool{}
	exprs := 0
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = title
			}
			if id, ok := v["id"].(float64); ok && v["gridPos"] != nil {
				if ids[id] {
					t.Errorf("panel %q: duplicate id %v", where, id)
				}
				ids[id] = true
			}
			if e, ok := v["expr"].(string); ok {
				exprs++
				c.checkExpr(t, "dashboard panel "+strconv.Quote(where), e, nil)
			}
			for _, x := range v {
				walk(x, where)
			}
		case []any:
			for _, x := range v {
				walk(x, where)
			}
		}
	}
	walk(dash["panels"], "")
	if exprs < 20 {
		t.Errorf("only %d queries found in the dashboard", exprs)
	}
	tl, _ := dash["templating"].(map[string]any)
	vars, _ := tl["list"].([]any)
	for _, v := range vars {
		vm, _ := v.(map[string]any)
		def, _ := vm["definition"].(string)
		if strings.HasPrefix(def, "label_values(") {
			inner := strings.TrimSuffix(strings.TrimPrefix(def, "label_values("), ")")
			if i := strings.LastIndex(inner, ","); i > 0 {
				c.checkExpr(t, "dashboard variable "+def, inner[:i], nil)
			}
		}
	}
}

// ---- Kubernetes ----

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// dig walks maps by key and lists by index.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestKubernetesConfigMatchesManifests loads the ConfigMap's forward.yaml
// with the gateway's own parser and checks that the ports the DaemonSet,
// its probes and the Service use are the ones the config listens on.
func TestKubernetesConfigMatchesManifests(t *testing.T) {
	cm := readYAML(t, "kubernetes/configmap.yaml")
	text, _ := dig(cm, "data", "forward.yaml").(string)
	cfg, err := gateway.ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("configmap forward.yaml does not load: %v", err)
	}
	_, mport, err := net.SplitHostPort(cfg.Metrics.Listen)
	if err != nil {
		t.Fatalf("metrics.listen %q: %v", cfg.Metrics.Listen, err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Metrics.Listen); host == "127.0.0.1" || host == "localhost" {
		t.Errorf("metrics.listen %q: with hostNetwork the kubelet probes the node IP, loopback is unreachable", cfg.Metrics.Listen)
	}

	ds := readYAML(t, "kubernetes/daemonset.yaml")
	spec := dig(ds, "spec", "template", "spec")
	if dig(spec, "hostNetwork") != true {
		t.Error("the DaemonSet must use hostNetwork (RDMA-CM needs the host's addresses)")
	}
	drain := cfg.Shutdown.DrainTimeout
	if g, ok := dig(spec, "terminationGracePeriodSeconds").(int); !ok || time.Duration(g)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v must exceed the config's shutdown.drain_timeout %v", dig(spec, "terminationGracePeriodSeconds"), drain)
	}
	ctr := dig(spec, "containers", 0)
	ports := map[string]int{}
	for _, p := range dig(ctr, "ports").([]any) {
		ports[dig(p, "name").(string)] = dig(p, "containerPort").(int)
	}
	if strconv.Itoa(ports["metrics"]) != mport {
		t.Errorf("container port metrics = %d, config metrics.listen = %s", ports["metrics"], cfg.Metrics.Listen)
	}
	if ports["nfs-rdma"] != cfg.Listen.Port {
		t.Errorf("container port nfs-rdma = %d, config listen.port = %d", ports["nfs-rdma"], cfg.Listen.Port)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if p := dig(ctr, probe, "httpGet", "port"); p != "metrics" {
			t.Errorf("%s port = %v, want the metrics port", probe, p)
		}
		if p := dig(ctr, probe, "httpGet", "path"); p != "/metrics" {
			t.Errorf("%s path = %v, want /metrics", probe, p)
		}
	}
	if args := dig(ctr, "args"); args == nil || !strings.Contains(strings.Join(toStrings(args), " "), "/etc/rdmagw/forward.yaml") {
		t.Errorf("container args %v do not run the ConfigMap's forward.yaml", args)
	}
	caps := toStrings(dig(ctr, "securityContext", "capabilities", "add"))
	if !contains(caps, "IPC_LOCK") {
		t.Errorf("capabilities.add %v lacks IPC_LOCK (memory registration past RLIMIT_MEMLOCK)", caps)
	}

	svc := readYAML(t, "kubernetes/service.yaml")
	if p := dig(svc, "spec", "ports", 0, "port"); strconv.Itoa(p.(int)) != mport {
		t.Errorf("Service port %v, config metrics port %s", p, mport)
	}
	if n := dig(svc, "metadata", "name"); n != "rdmagw" {
		t.Errorf("Service name %v: the rules expect job=\"rdmagw\", which the Prometheus Operator takes from it", n)
	}
	sel := dig(svc, "spec", "selector").(map[string]any)
	podLabels := dig(ds, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("Service selector %s=%v does not match the pod labels %v", k, v, podLabels)
		}
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// ---- systemd ----

// TestSystemdUnits checks what the units must keep: the config path of
// each, Type=notify with a watchdog and a reload, a stop timeout above
// the default shutdown.drain_timeout, and the RDMA prerequisites.
// systemd-analyze verify checks the syntax (README).
func TestSystemdUnits(t *testing.T) {
	for unit, cfg := range map[string]string{
		"systemd/rdmagw.service":  "/etc/rdmagw/forward.yaml",
		"systemd/rdmagw@.service": "/etc/rdmagw/%i.yaml",
	} {
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		kv := map[string][]string{}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == '[' {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("%s: not key=value: %q", unit, line)
				continue
			}
			kv[k] = append(kv[k], v)
		}
		want := map[string]string{
			"Type":                  "notify",
			"ExecReload":            "/bin/kill -HUP $MAINPID",
			"WatchdogSec":           "30s",
			"Restart":               "on-failure",
			"LimitMEMLOCK":          "infinity",
			"NoNewPrivileges":       "yes",
			"ProtectSystem":         "strict",
			"CapabilityBoundingSet": "CAP_NET_BIND_SERVICE CAP_IPC_LOCK",
			"ExecStart":             "/usr/local/bin/rdmagw serve -c " + cfg,
		}
		for k, v := range want {
			if got := kv[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s=%v, want %s", unit, k, got, v)
			}
		}
		if stop, err := time.ParseDuration(strings.Join(kv["TimeoutStopSec"], "")); err != nil || stop <= gateway.DefaultDrainTimeout {
			t.Errorf("%s: TimeoutStopSec=%v must exceed shutdown.drain_timeout's default %v (%v)", unit, kv["TimeoutStopSec"], gateway.DefaultDrainTimeout, err)
		}
		if !contains(kv["DeviceAllow"], "/dev/infiniband/rdma_cm rw") {
			t.Errorf("%s: DeviceAllow %v lacks /dev/infiniband/rdma_cm", unit, kv["DeviceAllow"])
		}
	}
}

// TestKeepalivedExample: the keepalived example checks the metrics address
// the shipped forward config serves, both hosts start as BACKUP without
// preemption, the config listens on every address (so the standby accepts
// once the VIP arrives), and the check script judges a real HTTP endpoint:
// healthy when it serves rdmagw series, failed on an error status, on
// other content and when nothing listens.
func TestKeepalivedExample(t *testing.T) {
	b, err := os.ReadFile("keepalived/keepalived.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	raw, err := os.ReadFile("../configs/forward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.ParseConfig(raw)
	if err != nil {
		t.Fatalf("configs/forward.yaml: %v", err)
	}
	wantScript := `script "/usr/local/sbin/rdmagw-check.sh http://` + cfg.Metrics.Listen + `/metrics"`
	if !strings.Contains(conf, wantScript) {
		t.Errorf("keepalived.conf does not run %s (metrics.listen is %s)", wantScript, cfg.Metrics.Listen)
	}
	for _, want := range []string{"state BACKUP", "nopreempt", "track_script", "chk_rdmagw"} {
		if !strings.Contains(conf, want) {
			t.Errorf("keepalived.conf lacks %q", want)
		}
	}
	if cfg.Listen.Address != "0.0.0.0" && cfg.Listen.Address != "::" {
		t.Errorf("configs/forward.yaml listen.address = %q: the keepalived setup (deploy/README.md) needs the wildcard", cfg.Listen.Address)
	}

	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed: check script not run")
	}
	check := func(url string) bool {
		return exec.Command("sh", "keepalived/rdmagw-check.sh", url).Run() == nil
	}
	serve := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	if !check(serve(200, "# HELP rdmagw_connections x\nrdmagw_connections{mode=\"forward\"} 3\n")) {
		t.Error("check fails on a healthy gateway")
	}
	if check(serve(500, "rdmagw_connections 3\n")) {
		t.Error("check passes on HTTP 500")
	}
	if check(serve(200, "go_goroutines 7\n")) {
		t.Error("check passes on a page without rdmagw series")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if check("http://" + addr + "/metrics") {
		t.Error("check passes with nothing listening")
	}
}
