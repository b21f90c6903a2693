package domain_test

import (
	"bytes"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

func TestLoggerFallsBackToTheManagers(t *testing.T) {
	var mine, own bytes.Buffer
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1", Logger: zerolog.New(&mine)})
	require.NoError(t, err)
	defer mgr.Close()

	l := mgr.Logger(zerolog.Logger{})
	l.Info().Msg("inherited")
	assert.Contains(t, mine.String(), "inherited", "the zero value takes the manager's")

	l = mgr.Logger(zerolog.New(&own))
	l.Info().Msg("explicit")
	assert.Contains(t, own.String(), "explicit")
	assert.NotContains(t, mine.String(), "explicit", "one given explicitly is kept")

	l = mgr.Logger(zerolog.Nop())
	l.Info().Msg("silenced")
	assert.NotContains(t, mine.String(), "silenced", "zerolog.Nop silences a part")
}

func TestSnapshotRegistrationsAndCache(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1", MaxRegisteredBytes: 1 << 20})
	require.NoError(t, err)
	defer mgr.Close()
	mem, err := mgr.AllocRegistered(8192, domain.AccessSend)
	require.NoError(t, err)
	c, err := mgr.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)

	s := mgr.Snapshot()
	assert.Equal(t, "tcp", s.Provider)
	assert.Equal(t, "127.0.0.1", s.Address)
	assert.Equal(t, 1, s.Registrations.Count)
	assert.Equal(t, int64(8192), s.Registrations.Bytes)
	assert.Equal(t, int64(1<<20), s.Registrations.MaxBytes)
	require.Len(t, s.Caches, 1)
	assert.Zero(t, s.Caches[0].Misses)

	require.NoError(t, c.Close())
	require.NoError(t, mem.Close())
	s = mgr.Snapshot()
	assert.Empty(t, s.Caches, "a closed cache leaves the registry")
	assert.Zero(t, s.Registrations.Count)
	assert.Equal(t, 1, s.Registrations.PeakCount)
}
