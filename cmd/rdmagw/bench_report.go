package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// benchRatio compares the gateway with the direct path for one workload.
type benchRatio struct {
	Op         string  `json:"op"`
	Throughput float64 `json:"throughput"` // gateway ops/s divided by direct ops/s
	P50        float64 `json:"p50_latency"`
	P99        float64 `json:"p99_latency"`
}

func benchRatios(results []benchResult) []benchRatio {
	var out []benchRatio
	for i, g := range results {
		if g.Path != "gateway" {
			continue
		}
		for _, d := range results[i+1:] {
			if d.Op == g.Op && d.Path == "direct" && d.OpsPerSec > 0 && d.P50Micros > 0 && d.P99Micros > 0 {
				out = append(out, benchRatio{Op: g.Op, Throughput: g.OpsPerSec / d.OpsPerSec,
					P50: g.P50Micros / d.P50Micros, P99: g.P99Micros / d.P99Micros})
				break
			}
		}
	}
	return out
}

func printBenchTable(w io.Writer, info *benchInfo, results []benchResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tpath\tops\tops/s\tMiB/s\tp50 µs\tp99 µs\terrors\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%d\t\n", r.Op, r.Path, r.Ops, r.OpsPerSec, r.MiBPerSec, r.P50Micros, r.P99Micros, r.Errors)
	}
	tw.Flush()
	if ratios := benchRatios(results); len(ratios) > 0 {
		fmt.Fprintln(w, "\ngateway / direct (throughput > 1: the gateway is faster; latency < 1: the gateway is quicker):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "op\tthroughput\tp50 latency\tp99 latency\t")
		for _, r := range ratios {
			fmt.Fprintf(tw, "%s\t%.2fx\t%.2fx\t%.2fx\t\n", r.Op, r.Throughput, r.P50, r.P99)
		}
		tw.Flush()
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "\n%s over %s stopped on an error: %s\n", r.Op, r.Path, r.FirstError)
		}
	}
	if info.MetricsURL != "" {
		fmt.Fprintf(w, "\nmetrics: %s\n", info.MetricsURL)
	}
}

func writeBenchJSON(w io.Writer, o *benchOptions, info *benchInfo, results []benchResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Run     *benchInfo    `json:"run"`
		Results []benchResult `json:"results"`
		Ratios  []benchRatio  `json:"ratios"`
	}{info, results, benchRatios(results)})
}
