package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/stats/promstats"
)

// metricsFlags is --metrics-addr, which every mode has: an HTTP endpoint
// that serves the domain's metrics while the mode runs.
type metricsFlags struct {
	metricsAddr string // "" when not asked for
}

func (m *metricsFlags) registerMetrics(fs *flag.FlagSet) {
	fs.Var(addrFlag{&m.metricsAddr}, "metrics-addr",
		"serve Prometheus metrics at http://IP:PORT/metrics (and the JSON snapshot at /snapshot) while running; port 0 picks one, printed on stderr")
}

// addrFlag is a flag.Value for "IP:PORT" (port 0 allowed).
type addrFlag struct{ s *string }

func (f addrFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f addrFlag) Set(s string) error {
	a, err := parseHostPort(s, true)
	if err != nil {
		return err
	}
	*f.s = a.String()
	return nil
}

// metricsShutdown bounds how long stopping the metrics server waits for a
// scrape in progress.
const metricsShutdown = time.Second

// openServed opens a run's domain with open and serves its metrics on
// metricsAddr (serveMetrics). done stops the metrics, then closes the
// domain, the order every mode needs; after an error nothing is left open.
func openServed(metricsAddr string, w io.Writer, open func() (*domain.Manager, error)) (mgr *domain.Manager, done func(), err error) {
	mgr, err = open()
	if err != nil {
		return nil, nil, err
	}
	stop, err := serveMetrics(metricsAddr, mgr, w)
	if err != nil {
		_ = mgr.Close()
		return nil, nil, err
	}
	return mgr, func() { stop(); _ = mgr.Close() }, nil
}

// serveMetrics serves mgr's metrics on addr until the returned stop is
// called (before mgr closes), and prints "METRICS http://ip:port/metrics"
// on w. With addr "" it does nothing. The registry also holds the Go
// runtime's and the process's collectors, which an operator expects
// beside the library's.
func serveMetrics(addr string, mgr *domain.Manager, w io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New(mgr), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	mux.HandleFunc("/snapshot", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(mgr.Snapshot())
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(w, "metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(w, "METRICS http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}
