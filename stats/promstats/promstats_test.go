package promstats_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/stats/promstats"
)

// TestMain fails the package if a poller or server outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait of these tests: far above what any step
// takes, so that only a defect, not a loaded machine, reaches it.
const waitFor = 30 * time.Second

func openDomain(t *testing.T) *domain.Manager {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	return mgr
}

// scrape fetches url and returns every sample as "name{labels}" → value,
// labels sorted, the provider label left out.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "provider" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// stream is a listener and a buffered sender on one manager, counting
// what arrives and what completes.
type stream struct {
	ln        *endpoint.Listener
	snd       *endpoint.SendEndpointBuffered
	received  atomic.Int64
	completed atomic.Int64
	peerGone  atomic.Int64
}

func openStream(t *testing.T, mgr *domain.Manager) *stream {
	t.Helper()
	s := &stream{}
	var err error
	s.ln, err = endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		OnData:             func(*endpoint.ReceiveEndpoint, []byte) { s.received.Add(1) },
		OnConnectionClosed: func(*endpoint.ReceiveEndpoint, error) { s.peerGone.Add(1) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.ln.Close()) })
	s.snd, err = endpoint.Dial(context.Background(), mgr, s.ln.Addr(), endpoint.SendConfig{
		OnSendCompleted: func(uint64, netio.Status) { s.completed.Add(1) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.snd.Close()) })
	require.Eventually(t, func() bool { return len(s.ln.Connections()) == 1 }, waitFor, time.Millisecond)
	return s
}

// send sends n messages of size bytes, retrying while no buffer is free,
// and waits until all completed and arrived.
func (s *stream) send(t *testing.T, n, size int) {
	t.Helper()
	want := s.received.Load() + int64(n)
	for sent := 0; sent < n; {
		buf := s.snd.GetBuffer()
		if buf == nil {
			time.Sleep(10 * time.Microsecond)
			continue
		}
		require.Equal(t, netio.OK, s.snd.SendBuffer(buf, size))
		sent++
	}
	require.Eventually(t, func() bool { return s.received.Load() == want && s.completed.Load() == want },
		waitFor, time.Millisecond)
}

func TestLint(t *testing.T) {
	mgr := openDomain(t)
	s := openStream(t, mgr)
	s.send(t, 10, 100)
	c := promstats.New(mgr)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.NoError(t, prometheus.NewPedanticRegistry().Register(c), "descriptors consistent with the metrics")
}

// TestScrapeCountsExactlyWhatWasSent scrapes over HTTP before and after
// real traffic on tcp, and after the sender closed.
func TestScrapeCountsExactlyWhatWasSent(t *testing.T) {
	mgr := openDomain(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promstats.New(mgr))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()

	s := openStream(t, mgr)
	const n, size = 500, 1000
	before := scrape(t, srv.URL)
	s.send(t, n, size)
	after := scrape(t, srv.URL)

	moved := func(key string) float64 { return after[key] - before[key] }
	assert.Equal(t, float64(n), moved("netio_messages_sent_total{kind=buffered}"))
	assert.Equal(t, float64(n*size), moved("netio_sent_bytes_total{kind=buffered}"))
	assert.Equal(t, float64(n), moved("netio_send_completions_total{kind=buffered,status=ok}"))
	assert.Zero(t, moved("netio_send_completions_total{kind=buffered,status=failed}"))
	assert.Equal(t, float64(n), moved("netio_messages_received_total{kind=receive}"))
	assert.Equal(t, float64(n*size), moved("netio_received_bytes_total{kind=receive}"))
	assert.Zero(t, after["netio_pending_sends{kind=buffered}"])
	assert.GreaterOrEqual(t, moved("netio_poller_completions_total{poller=default}"), float64(2*n),
		"a send and a receive completion per message")
	assert.Contains(t, after, "netio_poller_callback_seconds{poller=default}_count", "the callback histogram (sampled; internal/poll tests it)")
	assert.Equal(t, 1.0, after["netio_connections_accepted_total{}"])
	assert.Equal(t, 1.0, after["netio_endpoints{kind=buffered}"])
	assert.Equal(t, 1.0, after["netio_endpoints{kind=receive}"])
	assert.Positive(t, after["netio_buffers{kind=buffered}"])
	assert.Equal(t, after["netio_buffers{kind=buffered}"], after["netio_free_buffers{kind=buffered}"], "all back once completed")
	assert.Positive(t, after["netio_registrations{}"])

	require.NoError(t, s.snd.Close())
	require.Eventually(t, func() bool { return s.peerGone.Load() == 1 }, waitFor, time.Millisecond)
	closed := scrape(t, srv.URL)
	assert.Equal(t, after["netio_messages_sent_total{kind=buffered}"], closed["netio_messages_sent_total{kind=buffered}"],
		"a closed endpoint's counters stay in the total")
	assert.Equal(t, after["netio_messages_received_total{kind=receive}"], closed["netio_messages_received_total{kind=receive}"])
	assert.Zero(t, closed["netio_endpoints{kind=buffered}"])
	assert.Zero(t, closed["netio_endpoints{kind=receive}"])
	assert.Equal(t, 1.0, closed["netio_endpoints_closed_total{kind=buffered,reason=local}"])
	assert.Equal(t, 1.0, closed["netio_endpoints_closed_total{kind=receive,reason=peer}"])
}
