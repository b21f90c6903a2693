package promstats_test

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/stats/promstats"
)

// Register a collector for a manager and serve it: every scrape takes one
// snapshot of everything opened on the manager.
func ExampleNew() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New(mgr))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// A program serves mux, e.g. http.ListenAndServe("127.0.0.1:9100", mux).

	n, err := testutil.GatherAndCount(reg, "netio_registrations", "netio_messages_sent_total")
	fmt.Println(n, err)
	// Output: 1 <nil>
}
