package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A deliveryRecord counts, per sequence number, the messages a receiver
// delivered, in a file mapped shared: its pages belong to the file, not
// the process, so what a receiver recorded survives its SIGKILL and the
// test reads it from the file. A report, printed at the end, would die
// with the process.
//
// Byte seq of the file holds in its low bits how often message seq was
// delivered (saturating at recordMany) and in recordBad whether a copy of
// it failed verification.
const (
	recordSize = 1 << 20 // sequence numbers 0 … recordSize-1
	recordMany = 0x7f
	recordBad  = 0x80
)

type deliveryRecord struct{ b []byte }

// openRecord creates the file at path, recordSize zero bytes, and maps it.
func openRecord(path string) (*deliveryRecord, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping keeps the file
	if err := f.Truncate(recordSize); err != nil {
		return nil, err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, recordSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	return &deliveryRecord{b: b}, nil
}

// count records one delivery of message seq; false when seq is beyond the
// record.
func (r *deliveryRecord) count(seq uint64) bool {
	if seq >= recordSize {
		return false
	}
	if r.b[seq]&recordMany != recordMany {
		r.b[seq]++
	}
	return true
}

// bad records that a delivered copy of message seq failed verification.
func (r *deliveryRecord) bad(seq uint64) {
	if seq < recordSize {
		r.b[seq] |= recordBad
	}
}

// close unmaps the record; the file keeps what it holds.
func (r *deliveryRecord) close() error { return unix.Munmap(r.b) }

// deliveries sums the records at paths, which receivers wrote, and returns
// how often each sequence number was delivered, and which were delivered
// damaged at least once.
func deliveries(paths ...string) (count map[uint64]int, bad []uint64, err error) {
	count = make(map[uint64]int)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		if len(b) != recordSize {
			return nil, nil, fmt.Errorf("%s: %d bytes, want %d", path, len(b), recordSize)
		}
		for seq, v := range b {
			if v&recordMany != 0 {
				count[uint64(seq)] += int(v & recordMany)
			}
			if v&recordBad != 0 {
				bad = append(bad, uint64(seq))
			}
		}
	}
	return count, bad, nil
}

// TestDeliveryRecord checks that a record reads back as written while it
// is still mapped (as a killed receiver leaves it), that counts from
// several records add up, and that sequence numbers beyond it are refused;
// it needs no root.
func TestDeliveryRecord(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	a, err := openRecord(first)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.close()) })
	b, err := openRecord(second)
	require.NoError(t, err)

	for _, seq := range []uint64{1, 2, 3, 3} {
		assert.True(t, a.count(seq))
	}
	a.bad(2)
	assert.True(t, b.count(3))
	assert.True(t, b.count(recordSize-1))
	assert.False(t, b.count(recordSize), "beyond the record")
	for range recordMany + 5 {
		b.count(7)
	}
	require.NoError(t, b.close())

	got, bad, err := deliveries(first, second) // first still mapped
	require.NoError(t, err)
	assert.Equal(t, map[uint64]int{1: 1, 2: 1, 3: 3, 7: recordMany, recordSize - 1: 1}, got)
	assert.Equal(t, []uint64{2}, bad)

	// A new record starts empty, even where an old file was.
	c, err := openRecord(second)
	require.NoError(t, err)
	require.NoError(t, c.close())
	got, _, err = deliveries(second)
	require.NoError(t, err)
	assert.Empty(t, got)

	_, _, err = deliveries(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}
