package promstats_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/stats/promstats"
)

// TestNilSources: a collector of nothing, or of a nil manager, neither
// panics nor fails a scrape; a nil manager's snapshot is zero.
func TestNilSources(t *testing.T) {
	var nilMgr *domain.Manager
	assert.Zero(t, nilMgr.Snapshot().Provider)
	for name, c := range map[string]*promstats.Collector{"nil source": promstats.New(nil), "nil manager": promstats.New(nilMgr)} {
		assert.NotPanics(t, func() {
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(c), name)
			_, err := reg.Gather()
			assert.NoError(t, err, name)
		}, name)
	}
}
