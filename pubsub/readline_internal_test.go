package pubsub

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// errNoMoreYet stands for a peer that sent everything it meant to and
// waits for the answer.
var errNoMoreYet = errors.New("no more data yet")

// waitingReader returns its data, then errNoMoreYet, counting how often
// it was asked past its data.
type waitingReader struct {
	data    *strings.Reader
	waiting int
}

func (r *waitingReader) Read(b []byte) (int, error) {
	if r.data.Len() == 0 {
		r.waiting++
		return 0, errNoMoreYet
	}
	return r.data.Read(b)
}

// TestReadLineRefusesWithoutWaiting: a line that reached MaxLineBytes
// without its LF is refused at once, from the bytes that arrived, rather
// than after more bytes (or the hello timeout) that a peer waiting for
// its answer never sends; a line of MaxLineBytes with its LF is read.
func TestReadLineRefusesWithoutWaiting(t *testing.T) {
	for _, n := range []int{MaxLineBytes, MaxLineBytes + 10, 3 * MaxLineBytes / 2} {
		r := &waitingReader{data: strings.NewReader(strings.Repeat("x", n))}
		_, _, err := readLine(bufio.NewReaderSize(r, 64<<10), nil)
		assert.ErrorIs(t, err, errLineTooLong, "%d bytes without LF", n)
		assert.ErrorIs(t, err, ErrMalformed, "%d bytes without LF", n)
		assert.Zero(t, r.waiting, "%d bytes without LF: waited for more", n)
	}
	line := strings.Repeat("x", MaxLineBytes-1) + "\n"
	r := &waitingReader{data: strings.NewReader(line + "y")}
	got, _, err := readLine(bufio.NewReaderSize(r, 64<<10), nil)
	assert.NoError(t, err)
	assert.Equal(t, len(line), len(got))
	assert.Zero(t, r.waiting)
}
