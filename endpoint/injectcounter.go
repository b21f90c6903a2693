package endpoint

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
)

// openCounter opens the send counter of a connected endpoint with
// SendConfig.Inject; a test replaces it to stand for a provider without
// counters.
var openCounter = (*fabric.Domain).OpenCounter

// warnedNoCounter makes the warning about a provider without counters
// once per process.
var warnedNoCounter atomic.Bool

// confirmInjects opens the send counter that confirms the endpoint's
// injects (sendcore.Core.ConfirmInjects). A provider without counters
// (ENOSYS or EOPNOTSUPP from fi_cntr_open: verbs' msg domain has none)
// does not fail the dial: the endpoint injects unconfirmed, as without
// the counter (fi_inject, no completion bound selectively), Close does not
// wait for its injects, and SendStats.InjectsUnconfirmed counts nothing,
// as it cannot know; nothing of the library's bounds what the provider
// holds then (SendConfig.MaxInjectsHeld reads the counter); the first
// such endpoint logs a warning. Any other error fails the dial.
func (c *sendConn) confirmInjects(mgr *domain.Manager, linger time.Duration, maxHeld int) error {
	cntr, err := openCounter(mgr.Domain())
	if err == nil {
		c.cntr = cntr
		c.ConfirmInjects(cntr, linger, maxHeld)
		return nil
	}
	if !errors.Is(err, fabric.ENOSYS) && !errors.Is(err, fabric.EOPNOTSUPP) {
		return err
	}
	if !warnedNoCounter.Swap(true) {
		c.Log.Warn().Err(err).Str("provider", mgr.Provider()).
			Msg("no send counters: injects are not confirmed, and those the provider holds at Close or on a broken connection may be lost although reported OK")
	}
	return nil
}

// injectCounted says whether the endpoint's injects are counted: posted
// with fabric.Endpoint.InjectCounted, its other sends asking for their
// completion (fabric.BindSelective).
func (c *sendConn) injectCounted() bool { return c.cntr != nil }
