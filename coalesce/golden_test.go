package coalesce

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workedExample is the worked example of docs/wire.md.
var workedExample = []msg{
	{Tag: 0x0102030405060708, Data: "ABC"},
	{Tag: 0x0102030405060708, Data: "hello"},
	{Tag: 0x1122334455667788, Status: 7},
	{Tag: 0x1122334455667788, Status: 2, Data: "\xff"},
}

// workedExampleBytes pins the encoding of workedExample byte for byte.
var workedExampleBytes = []byte{
	0x03, 0x00, 0x00, 0x80, // message 0: tag follows, size 3
	0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // tag 0x0102030405060708
	'A', 'B', 'C',
	0x05, 0x00, 0x00, 0x00, // message 1: same tag, size 5
	'h', 'e', 'l', 'l', 'o',
	0x00, 0x00, 0x00, 0xc0, // message 2: tag and status follow, size 0
	0x07,                                           // status 7
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // tag 0x1122334455667788
	0x01, 0x00, 0x00, 0x40, // message 3: status follows, size 1
	0x02, // status 2
	0xff,
}

func TestGoldenEncode(t *testing.T) {
	e := NewEncoder(make([]byte, 64))
	for _, m := range workedExample {
		require.NoError(t, e.Append(m.Tag, m.Status, []byte(m.Data)))
	}
	assert.Equal(t, workedExampleBytes, e.Bytes())
}

func TestGoldenDecode(t *testing.T) {
	got, err := decodeAll(workedExampleBytes)
	require.NoError(t, err)
	assert.Equal(t, workedExample, got)
}

func TestGoldenMatchesWireSpec(t *testing.T) {
	assert.Equal(t, workedExampleBytes, readGoldenDump(t, "../docs/wire.md"),
		"the hex dump in docs/wire.md must be the encoder's output")
}

// TestGoldenTruncations checks the truncations docs/wire.md walks through.
func TestGoldenTruncations(t *testing.T) {
	malformed := []struct {
		cut    int
		offset int
		reason string
	}{
		{2, 0, "truncated header word: 2 of 4 bytes"},
		{8, 0, "truncated tag: 4 of 8 bytes"},
		{17, 15, "truncated header word: 2 of 4 bytes"},
		{28, 24, "truncated status: header word ends the buffer"},
		{41, 37, "truncated status: header word ends the buffer"},
		{42, 37, "payload of 1 bytes exceeds the 0 bytes left"},
	}
	for _, c := range malformed {
		_, err := Validate(workedExampleBytes[:c.cut])
		var me *MalformedError
		if assert.ErrorAs(t, err, &me, "cut after %d", c.cut) {
			assert.Equal(t, c.offset, me.Offset, "cut after %d", c.cut)
			assert.Equal(t, c.reason, me.Reason, "cut after %d", c.cut)
		}
	}
	for cut, count := range map[int]int{15: 1, 24: 2, 37: 3} {
		got, err := decodeAll(workedExampleBytes[:cut])
		assert.NoError(t, err, "cut after %d", cut)
		assert.Equal(t, workedExample[:count], got, "cut after %d", cut)
	}
}

// readGoldenDump returns the bytes of the hexdump -C block between the
// golden markers of the file at path.
func readGoldenDump(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()

	var out []byte
	inside := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- golden:begin"):
			inside = true
		case strings.HasPrefix(line, "<!-- golden:end"):
			return out
		case inside && len(line) > 10 && line[8] == ' ':
			// "OFFSET  HEX HEX ...  |ASCII|": the hex sits between the
			// offset and the ASCII column.
			hexPart, _, _ := strings.Cut(line[10:], "|")
			b, err := hex.DecodeString(strings.Join(strings.Fields(hexPart), ""))
			require.NoError(t, err, "line %q", line)
			out = append(out, b...)
		}
	}
	require.NoError(t, sc.Err())
	require.Fail(t, "no golden block in "+path)
	return nil
}
