package poll

// SetLastOfBatch sets whether the completion being delivered ends its
// batch, for tests of Repost made outside a delivery (in Do).
func (p *Poller) SetLastOfBatch(on bool) { p.lastOfBatch = on }
