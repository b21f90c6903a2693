package promstats_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/stats"
	"github.com/netio-go/netio/stats/promstats"
)

// snapshotSource is a Source without a manager, for descriptors.
type snapshotSource struct{}

func (snapshotSource) Snapshot() stats.Snapshot { return stats.Snapshot{} }

// exported returns the names of every metric the collector describes.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 256)
	promstats.New(snapshotSource{}).Describe(ch)
	close(ch)
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		names[m[1]] = true
	}
	return names
}

// TestDashboardUsesExportedMetrics reads docs/grafana-dashboard.json and
// checks it is a dashboard whose every query names metrics the collector
// exports, so that renaming a metric cannot leave a panel empty.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Schema     int    `json:"schemaVersion"`
		Templating struct {
			List []struct{ Name string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string             `json:"title"`
			Type    string             `json:"type"`
			GridPos struct{ W, H int } `json:"gridPos"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	assert.NotEmpty(t, dash.Title)
	assert.NotEmpty(t, dash.UID)
	assert.Positive(t, dash.Schema)
	require.NotEmpty(t, dash.Panels)

	names := exported(t)
	metric := regexp.MustCompile(`netio_[a-z_]+`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		assert.NotEmpty(t, p.Type, p.Title)
		assert.Positive(t, p.GridPos.W*p.GridPos.H, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			assert.NotEmpty(t, tg.RefID, p.Title)
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(m, "_bucket")
				assert.True(t, names[base], "panel %q uses %s, which the collector does not export", p.Title, m)
				used[base] = true
			}
		}
	}
	for _, want := range []string{"netio_sent_bytes_total", "netio_send_completions_total", "netio_free_buffers",
		"netio_registrations", "netio_poller_blocks_total"} {
		assert.True(t, used[want], "the dashboard shows %s", want)
	}
}
