package sources

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector reports the age of every source's data at each scrape.
type collector struct {
	r                *Reporter
	dataAge, upstAge *prometheus.Desc
}

// RegisterMetrics registers on reg, per data source (labels source and
// feed), read at each scrape from what r keeps:
//
//	patchline_source_sync_age_seconds       since the last successful sync or ingest
//	                                        (the sample's date for the bundled sample)
//	patchline_source_upstream_age_seconds   since the upstream's newest change, when known
//
// Failed attempts are counted by patchline_sync_runs_total{result="error"}.
func RegisterMetrics(reg prometheus.Registerer, r *Reporter) error {
	labels := []string{"source", "feed"}
	return reg.Register(&collector{
		r: r,
		dataAge: prometheus.NewDesc("patchline_source_sync_age_seconds",
			"Seconds since the last successful sync or ingest of a data source (since the sample's date for the bundled sample); absent before the first.", labels, nil),
		upstAge: prometheus.NewDesc("patchline_source_upstream_age_seconds",
			"Seconds since the newest change of a data source's upstream, as its last sync saw it; absent when unknown.", labels, nil),
	})
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dataAge
	ch <- c.upstAge
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.r.opt.Now()
	list, err := c.r.SourcesAt(ctx, now)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.dataAge, err)
		return
	}
	for _, s := range list {
		if s.DataAsOf != nil {
			ch <- prometheus.MustNewConstMetric(c.dataAge, prometheus.GaugeValue, now.Sub(*s.DataAsOf).Seconds(), s.Name, s.Feed)
		}
		if s.UpstreamModifiedAt != nil {
			ch <- prometheus.MustNewConstMetric(c.upstAge, prometheus.GaugeValue, now.Sub(*s.UpstreamModifiedAt).Seconds(), s.Name, s.Feed)
		}
	}
}
