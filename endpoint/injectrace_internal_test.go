package endpoint

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// TestInjectRacingCloseIsCounted: an inject the provider took while Close
// tears the endpoint down (its post returned, the core has not counted it
// yet, the guard still held) is counted in InjectsUnconfirmed: the
// teardown counts what the provider holds inside the guard's exclusive
// section, after every post in progress. The fault hook stands for a
// provider that took the inject and holds it: it returns success without
// posting, so the send counter never counts it as sent.
func TestInjectRacingCloseIsCounted(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	entered, proceed := make(chan struct{}), make(chan struct{})
	s.c.SetInjectFunc(func(*fabric.Endpoint, uint32, int) fabric.Errno {
		close(entered)
		<-proceed
		return 0 // taken and held: never counted as sent
	})
	sent := make(chan netio.Status, 1)
	go func() { sent <- r.send(s, 0, 64) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.Eventually(t, s.c.Ended, 10*time.Second, time.Millisecond, "the teardown has begun")
	time.Sleep(50 * time.Millisecond) // and waits for the post in progress
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a post held the guard", err)
	default:
	}
	close(proceed)
	assert.Equal(t, netio.OK, <-sent)
	require.NoError(t, <-closed)
	assert.Equal(t, uint64(1), s.Stats().InjectsUnconfirmed, "the inject the provider held at the close")
}
