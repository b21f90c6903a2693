package pubsub

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/netio-go/netio"
)

// ctlConn is a control connection from the subscriber's side: requests
// go out one at a time, and a reader goroutine parses the answers.
type ctlConn struct {
	conn    net.Conn
	timeout time.Duration
	answers chan Response
	errc    chan error
	quit    chan struct{}
	done    chan struct{}
	nextID  uint64
	out     []byte
}

func newCtlConn(conn net.Conn, timeout time.Duration) *ctlConn {
	c := &ctlConn{conn: conn, timeout: timeout, answers: make(chan Response), errc: make(chan error, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	go c.read()
	return c
}

// read parses answers until the connection ends or an answer is
// malformed, which ends it too.
func (c *ctlConn) read() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var buf []byte
	for {
		var line []byte
		var err error
		if line, buf, err = readLine(r, buf); err == nil {
			var resp Response
			if resp, err = ParseResponse(line); err == nil {
				select {
				case c.answers <- resp:
					continue
				case <-c.quit:
					return
				}
			}
		}
		c.errc <- err
		return
	}
}

// call sends req and waits for its answer; an error answer is an error
// matching ErrRefused.
func (c *ctlConn) call(ctx context.Context, req Request) (Response, error) {
	c.nextID++
	req.V, req.ID = ProtocolVersion, c.nextID
	c.out = appendLine(c.out[:0], req)
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(c.out); err != nil {
		return Response{}, err
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case resp := <-c.answers:
		switch {
		case resp.ID != req.ID:
			return Response{}, fmt.Errorf("%w: answer to request %d, want %d", ErrMalformed, resp.ID, req.ID)
		case resp.Op == OpError:
			return Response{}, fmt.Errorf("%w: %s", ErrRefused, resp.Error)
		}
		return resp, nil
	case err := <-c.errc:
		c.errc <- err // for the next reader of errc
		return Response{}, err
	case <-t.C:
		return Response{}, fmt.Errorf("%w: no answer to %s within %v", netio.ErrTimeout, req.Op, c.timeout)
	case <-ctx.Done():
		return Response{}, netio.ErrClosed
	}
}

// close ends the connection and waits for the reader.
func (c *ctlConn) close() {
	close(c.quit)
	c.conn.Close()
	<-c.done
}
