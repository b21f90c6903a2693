package domain_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// parkOnce returns a hook that parks the first goroutine reaching it until
// release is closed, and a channel closed once it is parked there.
func parkOnce(release <-chan struct{}) (func(), <-chan struct{}) {
	parked := make(chan struct{})
	var once sync.Once
	return func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(parked)
			<-release
		}
	}, parked
}

// TestCloseRefusesWhileARegistrationIsMade: a Register parked between its
// accounting and fi_mr_reg (where it is in no live set yet) makes Close
// refuse with ErrRegistrationsAlive; once it has finished and been closed,
// Close succeeds. Before the fix Close counted only finished registrations
// and ran fi_close(domain) while fi_mr_reg was about to run.
func TestCloseRefusesWhileARegistrationIsMade(t *testing.T) {
	m := open(t, domain.Config{})
	release := make(chan struct{})
	hook, parked := parkOnce(release)
	domain.SetTestHook(m, hook)
	type result struct {
		r   *domain.Registration
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := m.AllocRegistered(4096, domain.AccessSend)
		done <- result{r, err}
	}()
	<-parked
	err := m.Close()
	if err == nil {
		// The registering goroutine stays parked: released, it would call
		// fi_mr_reg on the domain just closed.
		t.Fatal("Close succeeded while a registration was being made")
	}
	assert.ErrorIs(t, err, domain.ErrRegistrationsAlive)
	assert.False(t, m.Closed(), "a refused Close changes nothing")
	close(release)
	res := <-done
	require.NoError(t, res.err)
	assert.Len(t, m.Registrations(), 1)
	require.NoError(t, res.r.Close())
	assert.NoError(t, m.Close())
}

// TestCloseRefusesWhileARegistrationIsUndone: a Registration.Close parked
// after leaving the live set and before fi_close(mr) makes Close refuse
// too; before the fix Close ran fi_close(domain) beside fi_close(mr).
func TestCloseRefusesWhileARegistrationIsUndone(t *testing.T) {
	m := open(t, domain.Config{})
	r, err := m.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	release := make(chan struct{})
	hook, parked := parkOnce(release)
	domain.SetTestHook(m, hook)
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	<-parked
	err = m.Close()
	if err == nil {
		t.Fatal("Close succeeded while a registration was being closed")
	}
	assert.ErrorIs(t, err, domain.ErrRegistrationsAlive)
	assert.False(t, m.Closed())
	close(release)
	require.NoError(t, <-done)
	assert.NoError(t, m.Close())
}

// TestCloseWhileRegistering: goroutines register and deregister while
// Close is tried again and again. Every refusal is ErrRegistrationsAlive;
// once Close succeeds nothing is registered, and every later registration
// is refused with ErrClosed. Close starts once registrations are under
// way. Bounded: each goroutine stops after 300 rounds or at its first
// ErrClosed, and Close is tried until they stop.
func TestCloseWhileRegistering(t *testing.T) {
	m := open(t, domain.Config{})
	const workers, rounds = 4, 300
	var wg sync.WaitGroup
	var made atomic.Int64
	stopped := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				r, err := m.AllocRegistered(4096, domain.AccessSend)
				if err != nil {
					assert.ErrorIs(t, err, netio.ErrClosed)
					return
				}
				made.Add(1)
				assert.NoError(t, r.Close())
			}
		}()
	}
	go func() { wg.Wait(); close(stopped) }()
	// Close once registrations are under way, not before they start.
	require.Eventually(t, func() bool { return made.Load() >= workers }, 10*time.Second, 10*time.Microsecond)
	closed, refusals := false, 0
	for !closed {
		select {
		case <-stopped:
			require.NoError(t, m.Close())
			closed = true
			continue
		default:
		}
		err := m.Close()
		if err == nil {
			closed = true
			break
		}
		refusals++
		if !assert.True(t, errors.Is(err, domain.ErrRegistrationsAlive), "%v", err) {
			break
		}
		time.Sleep(time.Duration(refusals%4) * time.Microsecond)
	}
	<-stopped
	t.Logf("%d refusals", refusals)
	assert.Zero(t, m.Stats().Registrations)
	assert.Empty(t, m.Registrations())
	_, err := m.AllocRegistered(4096, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrClosed)
}
