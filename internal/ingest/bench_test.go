package ingest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkIngestFeeds ingests the synthetic feeds that bench/gen wrote to
// the directory named by PATCHLINE_BENCH_FEEDS into a new catalog, the
// whole run once per iteration. Without the variable it is skipped:
//
//	go run ./bench/gen -out /tmp/feeds -cves 30000 -osv 20000
//	PATCHLINE_BENCH_FEEDS=/tmp/feeds go test -run '^$' -bench IngestFeeds -benchtime 1x -cpuprofile cpu.out ./internal/ingest
func BenchmarkIngestFeeds(b *testing.B) {
	dir := os.Getenv("PATCHLINE_BENCH_FEEDS")
	if dir == "" {
		b.Skip("PATCHLINE_BENCH_FEEDS names no directory of feeds written by bench/gen")
	}
	var sources []Source
	for _, arg := range []string{
		"cvelist=" + filepath.Join(dir, "cvelist.zip"),
		"nvd=" + filepath.Join(dir, "nvd"),
		"epss=" + filepath.Join(dir, "epss_scores-2025-02-20.csv.gz"),
		"kev=" + filepath.Join(dir, "known_exploited_vulnerabilities.json"),
		"osv=" + filepath.Join(dir, "osv"),
	} {
		sources = append(sources, mustSource(b, arg))
	}
	for b.Loop() {
		db := mustOpenCatalog(b)
		res, err := Run(context.Background(), db, sources, Options{Rebuild: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Merged), "records")
	}
}
