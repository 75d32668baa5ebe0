package upstream

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchline/patchline/internal/catalog"
)

// Metrics counts the syncs this process runs. A nil *Metrics counts
// nothing.
type Metrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	records  *prometheus.CounterVec
}

// RegisterMetrics registers the sync metrics on reg: the state of every
// source as stored in the catalog (read at each scrape, so that every
// replica reports the syncs of whichever replica ran them), and counters
// of the syncs of this process, which it returns for Config.Metrics.
//
//	patchline_sync_last_success_timestamp_seconds{source}
//	patchline_sync_last_attempt_timestamp_seconds{source}
//	patchline_sync_stale{source}                    1 when stale
//	patchline_sync_consecutive_failures{source}
//	patchline_sync_last_records_changed{source}
//	patchline_sync_runs_total{source,result}        result: changed, unchanged, error
//	patchline_sync_duration_seconds{source}
//	patchline_sync_requests_total{source,code}      code 0: no answer
//	patchline_sync_bytes_total{source}
//	patchline_sync_records_changed_total{source}
func RegisterMetrics(reg prometheus.Registerer, states catalog.SyncStates, opt StatusOptions) (*Metrics, error) {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchline_sync_runs_total",
			Help: "Syncs run by this process, by source and result (changed, unchanged, error).",
		}, []string{"source", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "patchline_sync_duration_seconds",
			Help:    "Time to sync a source, fetch and ingest, by source.",
			Buckets: []float64{.1, .5, 1, 5, 15, 60, 300, 900, 3600},
		}, []string{"source"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchline_sync_requests_total",
			Help: "Requests to the upstreams, by source and HTTP status (0 when no answer came).",
		}, []string{"source", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchline_sync_bytes_total",
			Help: "Bytes of response bodies read from the upstreams, by source.",
		}, []string{"source"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchline_sync_records_changed_total",
			Help: "Upstream records added or changed by the syncs of this process, by source.",
		}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.duration, m.requests, m.bytes, m.records, newStateCollector(states, opt)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(r Result) {
	if m == nil {
		return
	}
	result := "changed"
	switch {
	case r.Err != nil:
		result = "error"
	case r.Ingest == nil:
		result = "unchanged"
	}
	m.runs.WithLabelValues(r.Source, result).Inc()
	m.duration.WithLabelValues(r.Source).Observe(r.Duration.Seconds())
	if r.RecordsChanged > 0 && r.Err == nil {
		m.records.WithLabelValues(r.Source).Add(float64(r.RecordsChanged))
	}
}

func (m *Metrics) request(source string, code int, n int64) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(source, strconv.Itoa(code)).Inc()
	if n > 0 {
		m.bytes.WithLabelValues(source).Add(float64(n))
	}
}

// stateCollector reports the stored sync state at each scrape.
type stateCollector struct {
	states                                   catalog.SyncStates
	opt                                      StatusOptions
	lastSuccess, lastAttempt, stale, failing *prometheus.Desc
	changed                                  *prometheus.Desc
}

func newStateCollector(states catalog.SyncStates, opt StatusOptions) *stateCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"source"}, nil)
	}
	return &stateCollector{
		states:      states,
		opt:         opt.withDefaults(),
		lastSuccess: desc("patchline_sync_last_success_timestamp_seconds", "Start of the last successful sync of a source, Unix seconds; 0 when never."),
		lastAttempt: desc("patchline_sync_last_attempt_timestamp_seconds", "Start of the last sync attempt of a source, Unix seconds; 0 when never."),
		stale:       desc("patchline_sync_stale", "1 when a source is stale: never synced, failing, or not synced for longer than the stale age."),
		failing:     desc("patchline_sync_consecutive_failures", "Consecutive failed sync attempts of a source."),
		changed:     desc("patchline_sync_last_records_changed", "Upstream records added or changed by the last successful sync of a source."),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lastSuccess, c.lastAttempt, c.stale, c.failing, c.changed} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := Status(ctx, c.states, c.opt)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.stale, err)
		return
	}
	unix := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return float64(t.Unix())
	}
	for _, s := range list {
		stale := 0.0
		if s.Stale {
			stale = 1
		}
		ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, unix(s.LastSuccess), s.Source)
		ch <- prometheus.MustNewConstMetric(c.lastAttempt, prometheus.GaugeValue, unix(s.LastAttempt), s.Source)
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, stale, s.Source)
		ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, float64(s.Failures), s.Source)
		ch <- prometheus.MustNewConstMetric(c.changed, prometheus.GaugeValue, float64(s.RecordsChanged), s.Source)
	}
}
