package sendcore

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// fakeRunner is a RunPoster whose keys below 100 join (injects to one
// peer, say): post decides what PostRun posts of the run it is handed
// (nil: all of it). It records the runs handed and the sends posted alone.
type fakeRunner struct {
	post    func(keys []uint32) (int, fabric.Errno)
	runs    [][]uint32
	singles []uint32
}

func (f *fakeRunner) PostRun(_ *fabric.Endpoint, keys []uint32, _ []int) (int, fabric.Errno) {
	f.runs = append(f.runs, slices.Clone(keys))
	if f.post == nil {
		return len(keys), 0
	}
	return f.post(keys)
}

func (f *fakeRunner) Joins(prev, next uint32) bool { return prev < 100 && next < 100 }

// runCore returns a core whose hand-off drain posts through r: runs by
// PostRun, single sends by a post that records them and takes them.
func runCore(t *testing.T, r RunPoster, post PostFunc) *Core {
	t.Helper()
	c := &Core{runner: r, postSend: post}
	c.hand.init(64)
	c.Guard.Set(new(fabric.Endpoint)) // never called: the posts are fakes
	c.handOffTimer = time.AfterFunc(time.Hour, func() {})
	c.handOffTimer.Stop()
	return c
}

// drainQueued queues keys (length 1 each) and drains them once.
func drainQueued(t *testing.T, c *Core, keys ...uint32) {
	t.Helper()
	for _, k := range keys {
		queued, _ := c.hand.push(k, 1)
		require.True(t, queued)
	}
	c.drainHandOff()
}

// newFakeRun returns a fakeRunner and a core draining through it.
func newFakeRun(t *testing.T) (*fakeRunner, *Core) {
	f := &fakeRunner{}
	c := runCore(t, f, func(_ *fabric.Endpoint, key uint32, _ int) fabric.Errno {
		f.singles = append(f.singles, key)
		return 0
	})
	return f, c
}

// TestDrainHandOffRuns: the drain hands the runner only sends that join,
// posts a send whose next does not join alone without asking PostRun,
// and counts a run's sends off its budget, so that one drain posts
// exactly what was queued when it began, RunMax at most per run.
func TestDrainHandOffRuns(t *testing.T) {
	f, c := newFakeRun(t)
	drainQueued(t, c, 1, 2, 3, 200, 4, 5, 300)
	assert.Equal(t, [][]uint32{{1, 2, 3}, {4, 5}}, f.runs, "runs of joining sends only")
	assert.Equal(t, []uint32{200, 300}, f.singles, "the rest alone, PostRun not asked")
	assert.False(t, c.hand.busy())

	f, c = newFakeRun(t)
	keys := make([]uint32, RunMax+8)
	for i := range keys {
		keys[i] = uint32(i)
	}
	drainQueued(t, c, keys...)
	require.Len(t, f.runs, 2)
	assert.Equal(t, keys[:RunMax], f.runs[0], "RunMax at most")
	assert.Equal(t, keys[RunMax:], f.runs[1], "the budget left covers the rest, no more")
	assert.Empty(t, f.singles)
	assert.False(t, c.hand.busy())
}

// TestDrainHandOffRunRefused: a send refused for now in a run is posted
// alone next (offered twice, not handed to a new run), then the rest go
// as a run again; a PostRun that claims more than it was handed removes
// no more than that from the queue.
func TestDrainHandOffRunRefused(t *testing.T) {
	f, c := newFakeRun(t)
	refused := false
	f.post = func(keys []uint32) (int, fabric.Errno) {
		if !refused {
			refused = true
			return 1, fabric.EAGAIN
		}
		return len(keys), 0
	}
	drainQueued(t, c, 1, 2, 3, 4)
	assert.Equal(t, [][]uint32{{1, 2, 3, 4}, {3, 4}}, f.runs)
	assert.Equal(t, []uint32{2}, f.singles, "the refused send alone, once")
	assert.False(t, c.hand.busy())

	f, c = newFakeRun(t)
	f.post = func([]uint32) (int, fabric.Errno) { return 99, 0 }
	drainQueued(t, c, 1, 2, 200, 3)
	assert.Equal(t, [][]uint32{{1, 2}}, f.runs)
	assert.Equal(t, []uint32{200, 3}, f.singles, "what followed the run is still posted")
	assert.False(t, c.hand.busy())
}

// countRunner is a RunPoster that posts every run it is handed and
// records nothing, for counting allocations.
type countRunner struct{ posted int }

func (r *countRunner) PostRun(_ *fabric.Endpoint, keys []uint32, _ []int) (int, fabric.Errno) {
	r.posted += len(keys)
	return len(keys), 0
}

func (r *countRunner) Joins(prev, next uint32) bool { return true }

// TestDrainHandOffRunAllocs: the run path allocates nothing.
func TestDrainHandOffRunAllocs(t *testing.T) {
	r := &countRunner{}
	c := runCore(t, r, func(*fabric.Endpoint, uint32, int) fabric.Errno { return 0 })
	allocs := testing.AllocsPerRun(100, func() {
		for k := range uint32(8) {
			c.hand.push(k, 1)
		}
		c.drainHandOff()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 8*101, r.posted, "every send went in a run")
}

// runKind is a Kind that posts runs (its Kind methods are never called).
type runKind struct {
	Kind
	*fakeRunner
}

// TestRunnerOnlyWithoutCoreInjects: a run skips the core's inject
// accounting, so the drain hands runs only to a core with neither its
// inject path nor ConfirmInjects, whichever the kind sets up first.
func TestRunnerOnlyWithoutCoreInjects(t *testing.T) {
	post := func(*fabric.Endpoint, uint32, int) fabric.Errno { return 0 }
	newCore := func() *Core {
		c := &Core{kind: runKind{fakeRunner: &fakeRunner{}}}
		c.opts.Inject = true
		return c
	}
	c := newCore()
	c.InitHandOff(4, post)
	assert.NotNil(t, c.runner, "a RunPoster kind, nothing else: runs")
	c.InitInject(4, nil, post)
	assert.Nil(t, c.runner, "the core's inject path: no runs")

	c = newCore()
	c.InitInject(4, nil, post)
	c.InitHandOff(4, post)
	assert.Nil(t, c.runner, "the inject path set up first: no runs")

	c = newCore()
	c.InitHandOff(4, post)
	c.ConfirmInjects(openTestCounter(t), 0, 0)
	assert.Nil(t, c.runner, "the core counts what the provider holds: no runs")
}
