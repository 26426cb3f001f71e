package modetest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
)

// Every metric a forward or a reverse gateway registers is named in
// package metricname, and every name there is registered: the names are
// spelled in one place, and what reads them back (gwstats, tests) reads
// metrics that exist.
func TestMetricNamesInOnePlace(t *testing.T) {
	registered := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, m := range []*gateway.Metrics{forwardtest.Start(t, "127.0.0.1:9").Metrics(), startReverse(t, "127.0.0.1:9", nil).Metrics()} {
		ch := make(chan *prometheus.Desc)
		go func() { m.Registry.Describe(ch); close(ch) }()
		for d := range ch {
			sub := fqName.FindStringSubmatch(d.String())
			if sub == nil {
				t.Fatalf("no name in %s", d)
			}
			name := sub[1]
			if !strings.HasPrefix(name, "rdmagw_") || strings.HasPrefix(name, "rdmagw_auxrelay_") {
				continue // Go runtime and process collectors; the auxrelay's own
			}
			registered[name] = true
			if !metricname.Known(name) {
				t.Errorf("%s is registered but not named in package metricname", name)
			}
		}
	}
	for _, n := range metricname.All {
		if !registered[n] {
			t.Errorf("%s is named in package metricname but no gateway registers it", n)
		}
	}
}
