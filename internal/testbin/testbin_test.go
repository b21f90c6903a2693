package testbin

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test; both end the goroutine that called them, as in testing.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) {
	r.skipped = "skip"
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	runtime.Goexit()
}

// pathOf runs p.Path on a recorder in a goroutine of its own.
func pathOf(t *testing.T, p *Program) (string, *recorder) {
	r := &recorder{TB: t}
	var path string
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = p.Path(r)
	}()
	<-done
	return path, r
}

func TestGoBuiltOnceAndRemoved(t *testing.T) {
	p := Go("hello", "testdata/hello", ".")
	first := p.Path(t)
	info, err := os.Stat(first)
	require.NoError(t, err)
	stamp := info.ModTime()
	assert.Equal(t, first, p.Path(t), "the second Path builds nothing new")
	info, err = os.Stat(first)
	require.NoError(t, err)
	assert.Equal(t, stamp, info.ModTime(), "the binary was not rebuilt")
	out, err := exec.Command(first).Output()
	require.NoError(t, err)
	assert.Equal(t, "hello from testbin\n", string(out))
	p.Remove()
	_, err = os.Stat(first)
	assert.ErrorIs(t, err, os.ErrNotExist, "Remove deletes the build")
}

func TestCBuilt(t *testing.T) {
	p := C("hello", "testdata/hello.c", "-O2", "-Wall", "-Werror")
	defer p.Remove()
	out, err := exec.Command(p.Path(t)).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "hello from testbin, libfabric")
}

func TestBuildErrorFailsEveryCaller(t *testing.T) {
	p := C("broken", "testdata/broken.c")
	defer p.Remove()
	for range 2 {
		_, r := pathOf(t, p)
		assert.Contains(t, r.failed, "building", "a failed build fails the test")
		assert.Empty(t, r.skipped)
	}
	assert.Contains(t, p.err.Error(), "not_declared", "the compiler's words are kept")
}

func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	c := C("hello", "testdata/hello.c")
	_, r := pathOf(t, c)
	assert.Equal(t, "skip", r.skipped, "without cc the test skips")
	assert.Empty(t, r.failed)

	g := Go("hello", "testdata/hello", ".")
	_, r = pathOf(t, g)
	assert.Empty(t, r.skipped)
	assert.NotEmpty(t, r.failed, "without the go tool the test fails")
	assert.Contains(t, g.err.Error(), "go tool")
	c.Remove()
	g.Remove()
}
