package agent

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"berth.dev/berth/api/v1alpha1"
)

// Metrics are the agent's Prometheus metrics, in a registry of their own
// (not the global one) so that tests and simulated fleets can run many
// agents in one process.
type Metrics struct {
	Registry *prometheus.Registry
	// CheckDuration is the time of one discovery and evaluation.
	CheckDuration prometheus.Histogram
	// Verdicts counts the node's platforms per verdict after the last cycle.
	Verdicts *prometheus.GaugeVec
	// Publishes counts writes by what was written (report, labels).
	Publishes *prometheus.CounterVec
	// PublishErrors counts failed publish attempts.
	PublishErrors prometheus.Counter
	// APIRequests counts API server requests by HTTP method (GET are reads,
	// PATCH writes), as measured on the client's transport.
	APIRequests *prometheus.CounterVec
}

// NewMetrics registers the agent's metrics and the Go runtime collectors
// in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		CheckDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_agent_check_duration_seconds", Help: "Time of one discovery and evaluation of the node.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
		Verdicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_agent_platforms", Help: "Platforms of the node by verdict after the last evaluation.",
		}, []string{"verdict"}),
		Publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_agent_publishes_total", Help: "Writes to the API server, by object (report, labels).",
		}, []string{"object"}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_agent_publish_errors_total", Help: "Failed publish attempts (each is retried with backoff).",
		}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_agent_api_requests_total", Help: "API server requests by HTTP method.",
		}, []string{"method"}),
	}
	m.Registry.MustRegister(m.CheckDuration, m.Verdicts, m.Publishes, m.PublishErrors, m.APIRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) observeCheck(d time.Duration, s v1alpha1.Summary) {
	m.CheckDuration.Observe(d.Seconds())
	m.Verdicts.WithLabelValues(string(v1alpha1.VerdictReady)).Set(float64(s.Ready))
	m.Verdicts.WithLabelValues(string(v1alpha1.VerdictWarn)).Set(float64(s.Warn))
	m.Verdicts.WithLabelValues(string(v1alpha1.VerdictNotReady)).Set(float64(s.NotReady))
}

// Handler serves /healthz (the process is alive), /readyz (the last
// publish succeeded) and /metrics.
func Handler(a *Agent, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.Ready() {
			http.Error(w, "not published yet, or the last publish failed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	return mux
}
