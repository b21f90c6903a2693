package endpoint

// SendsHeld returns how many sends the provider holds unsent, as the
// send counter of an endpoint with SendConfig.Inject tells: for tests of
// SendConfig.MaxInjectsHeld.
func SendsHeld(s *SendEndpointBuffered) uint64 { return s.c.SendsHeld() }
