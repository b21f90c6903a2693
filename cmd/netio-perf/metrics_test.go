package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/stats"
)

// metricValue returns the value of the sample of /metrics text whose line
// starts with prefix (name and labels), or fails.
func metricValue(t *testing.T, text, prefix string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `[^ ]* (\S+)$`)
	m := re.FindStringSubmatch(text)
	require.NotNil(t, m, "no %s in:\n%s", prefix, text)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestServerServesMetrics runs a server with --metrics-addr, sends it
// 1000 messages of 1 KiB from a client (which serves metrics too), and
// scrapes what the server received; once the server exits, the metrics
// endpoint is gone too.
func TestServerServesMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srvCtx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := run(srvCtx, []string{"server", "--listen", "127.0.0.1:0", "--buf-size", "1K", "--metrics-addr", "127.0.0.1:0"}, outW, errW)
		outW.Close()
		errW.Close()
		code <- c
	}()
	firstLine := func(r io.Reader, prefix string) string {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				go func() { _, _ = io.Copy(io.Discard, r) }()
				return rest
			}
		}
		return ""
	}
	metricsURL := firstLine(errR, "METRICS ")
	require.NotEmpty(t, metricsURL)
	addr := firstLine(outR, "LISTENING ")
	require.NotEmpty(t, addr)

	var clientErr strings.Builder
	require.Equal(t, exitOK, run(ctx, []string{"client", "--connect", addr, "--size", "1K", "--count", "1000", "--metrics-addr", "127.0.0.1:0"}, io.Discard, &clientErr))
	assert.Contains(t, clientErr.String(), "METRICS http://", "the client names its metrics address on the stderr it was given")
	var text string
	require.Eventually(t, func() bool {
		text = get(t, metricsURL)
		return metricValue(t, text, `netio_endpoints{kind="receive"`) == 0
	}, 30*time.Second, 10*time.Millisecond, "the client's connection ended")
	assert.Equal(t, 1000.0, metricValue(t, text, `netio_messages_received_total{kind="receive"`))
	assert.Equal(t, 1000.0*1024, metricValue(t, text, `netio_received_bytes_total{kind="receive"`))
	assert.Equal(t, 1.0, metricValue(t, text, `netio_connections_accepted_total{`))
	assert.Contains(t, text, "go_goroutines", "the runtime's collector beside the library's")

	var snap stats.Snapshot
	require.NoError(t, json.Unmarshal([]byte(get(t, strings.TrimSuffix(metricsURL, "/metrics")+"/snapshot")), &snap))
	assert.Equal(t, "tcp", snap.Provider)
	require.Len(t, snap.Listeners, 1)
	assert.Equal(t, addr, snap.Listeners[0].Addr)

	stopServer()
	select {
	case c := <-code:
		assert.Equal(t, exitOK, c)
	case <-ctx.Done():
		t.Fatal("server did not exit")
	}
	_, err := http.Get(metricsURL)
	assert.Error(t, err, "the metrics server stops with the mode")
}

func TestMetricsAddrUsageError(t *testing.T) {
	for _, bad := range []string{"nohostport", "127.0.0.1:99999", "host:1"} {
		assert.Equal(t, exitUsage, run(t.Context(), []string{"--metrics-addr", bad}, io.Discard, io.Discard), bad)
	}
}
