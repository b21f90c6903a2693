package netns

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testbin"
)

// netioPerf is built once per test binary; TestMain removes it.
var netioPerf = testbin.Go("netio-perf", ".", "github.com/netio-go/netio/cmd/netio-perf")

// buildPerf returns cmd/netio-perf, built on first use.
func buildPerf(t *testing.T) string {
	t.Helper()
	return netioPerf.Path(t)
}

// perfProc is netio-perf running on a host of a topology.
type perfProc struct {
	cmd   *exec.Cmd
	lines chan string // stdout, closed at exit
	done  chan error
	err   lockedBuffer
}

// lockedBuffer is a strings.Builder safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPerf runs netio-perf args... on host i.
func startPerf(t *testing.T, ctx context.Context, tp *topology, i int, bin string, args ...string) *perfProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script, "exec", tp.name, strconv.Itoa(i), bin}, args...)...)
	p := &perfProc{cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
	cmd.Stderr = &p.err
	t.Cleanup(func() { // what every process said, when the test failed
		if t.Failed() {
			t.Logf("host %d: netio-perf %s stderr:\n%s", i, args[0], p.err.String())
		}
	})
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	return p
}

// waitStderr waits until the process has written text to stderr.
func (p *perfProc) waitStderr(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	for !strings.Contains(p.err.String(), text) {
		select {
		case <-ctx.Done():
			t.Fatalf("no %q on stderr: %s", text, p.err.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// last waits for the process to exit and returns its last stdout line.
func (p *perfProc) last(t *testing.T) string {
	t.Helper()
	var last string
	for line := range p.lines {
		last = line
	}
	assert.NoError(t, <-p.done, "stderr: %s", p.err.String())
	return last
}

// TestPubSubHosts: 2 publisher hosts serve 500 tags each (1000 in all), 4
// subscriber hosts subscribe to random sets of about 100 tags of each
// publisher (one netio-perf subscribe per publisher), and every subscriber
// gets exactly the messages of its tags, each checked against the sequence
// number it counted (per-tag order), with Block: nothing dropped, nothing
// missed.
func TestPubSubHosts(t *testing.T) {
	bin := buildPerf(t)
	const pubs, subs, tagsPer, rounds, size = 2, 4, 500, 100, 256
	onEachProvider(t, pubs+subs, func(t *testing.T, provider string, tp *topology) {
		ctx := testContext(t)
		count := tagsPer * rounds // per publisher: every tag gets rounds messages
		timeout := "70s"
		var pubProcs []*perfProc
		for p := 1; p <= pubs; p++ {
			pp := startPerf(t, ctx, tp, p, bin, "publish", "--provider", provider,
				"--listen", tp.addr(p)+":7000", "--tags", strconv.Itoa(tagsPer), "--tag-base", strconv.Itoa((p-1)*tagsPer),
				"--size", strconv.Itoa(size), "--count", strconv.Itoa(count), "--subscribers", strconv.Itoa(subs),
				"--verify", "--log", "--json", "--timeout", timeout)
			select {
			case line := <-pp.lines:
				require.Equal(t, "LISTENING "+tp.addr(p)+":7000", line)
			case <-ctx.Done():
				t.Fatal("publisher did not start")
			}
			pubProcs = append(pubProcs, pp)
		}
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		type subRun struct {
			proc *perfProc
			want uint64
			pub  int
		}
		var runs []subRun
		for s := pubs + 1; s <= pubs+subs; s++ {
			for p := 1; p <= pubs; p++ {
				base := (p - 1) * tagsPer
				perm := rng.Perm(tagsPer)[:50+rng.IntN(100)]
				var list []string
				for _, k := range perm {
					list = append(list, strconv.Itoa(base+k))
				}
				want := uint64(len(perm) * rounds)
				proc := startPerf(t, ctx, tp, s, bin, "subscribe", "--provider", provider,
					"--connect", tp.addr(p)+":7000", "--tags", strings.Join(list, ","),
					"--count", strconv.FormatUint(want, 10), "--verify", "--log", "--json", "--timeout", timeout)
				runs = append(runs, subRun{proc, want, p})
			}
		}
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := runs[i]
				var rep struct {
					Messages, Gaps, Missed, VerifyErrors uint64
					VerifyErrorsJSON                     uint64 `json:"verify_errors"`
				}
				line := r.proc.last(t)
				if !assert.NoError(t, json.Unmarshal([]byte(line), &rep), "subscriber %d: %q", i, line) {
					return
				}
				assert.Equal(t, r.want, rep.Messages, "subscriber %d of publisher %d", i, r.pub)
				assert.Zero(t, rep.Gaps+rep.Missed+rep.VerifyErrorsJSON, "subscriber %d of publisher %d", i, r.pub)
			}()
		}
		wg.Wait()
		for p, pp := range pubProcs {
			var rep struct {
				Published   uint64 `json:"published"`
				Subscribers []struct {
					Peer      string `json:"peer"`
					Delivered uint64 `json:"delivered"`
					Dropped   uint64 `json:"dropped"`
				} `json:"subscribers"`
			}
			line := pp.last(t)
			require.NoError(t, json.Unmarshal([]byte(line), &rep), "publisher %d: %q", p+1, line)
			assert.Equal(t, uint64(count), rep.Published)
			assert.Len(t, rep.Subscribers, subs)
			var want = map[string]uint64{}
			for _, r := range runs {
				if r.pub == p+1 {
					want[fmt.Sprint(r.want)]++
				}
			}
			for _, s := range rep.Subscribers {
				assert.Zero(t, s.Dropped, "publisher %d, subscriber %s", p+1, s.Peer)
				assert.Positive(t, want[fmt.Sprint(s.Delivered)], "publisher %d, subscriber %s delivered %d", p+1, s.Peer, s.Delivered)
			}
		}
	})
}

// TestPubSubPublisherKilled: a publisher process killed with SIGKILL
// mid-run and started again on the same address, continuing its numbering
// further on (--first-seq), is found again by its subscribers on two other
// hosts, which subscribe again by themselves and account for every
// sequence number: received (and checked) or reported missing.
func TestPubSubPublisherKilled(t *testing.T) {
	bin := buildPerf(t)
	const tags, size = 20, 512
	onEachProvider(t, 3, func(t *testing.T, provider string, tp *topology) {
		ctx := testContext(t)
		addr := tp.addr(1) + ":7000"
		publish := func(firstSeq, count int, subscribers string) *perfProc {
			return startPublisher(t, tp, bin, provider, "--tags", strconv.Itoa(tags), "--size", strconv.Itoa(size),
				"--count", strconv.Itoa(count), "--first-seq", strconv.Itoa(firstSeq), "--rate", "20000",
				"--subscribers", subscribers)
		}
		// The first run would publish 4000 per tag at 20000 messages/s (4
		// s); it is killed 1.5 s in, mid-run. The second starts every tag
		// at 5000 and publishes 1000 more per tag: each subscriber ends at
		// 6000 per tag, received or missed.
		first := publish(0, 4000*tags, "2")
		var subProcs []*perfProc
		for s := 2; s <= 3; s++ {
			subProcs = append(subProcs, startPerf(t, ctx, tp, s, bin, "subscribe", "--provider", provider,
				"--connect", addr, "--tags", "0-"+strconv.Itoa(tags-1), "--count", strconv.Itoa(6000*tags),
				"--verify", "--log", "--json", "--timeout", "60s"))
		}
		// Killed once both subscribers have data from it, not after a
		// fixed pause: on a loaded machine the subscribers may not even
		// have started by then, and would then count the second run
		// alone (and wait for the first's numbers until they time out).
		// Block keeps the publisher within its send window of them, so
		// it is mid-run at that point.
		for _, sp := range subProcs {
			sp.waitStderr(t, ctx, "first message from "+addr)
		}
		time.Sleep(500 * time.Millisecond) // more of the first run, which lasts 4 s at least
		require.NoError(t, first.cmd.Process.Kill())
		for range first.lines {
		}
		<-first.done // killed: its exit status says so
		second := publish(5000, 1000*tags, "2")
		for i, sp := range subProcs {
			var rep struct {
				Messages     uint64 `json:"messages"`
				Gaps         uint64 `json:"gaps"`
				Missed       uint64 `json:"missed"`
				Resets       uint64 `json:"resets"`
				VerifyErrors uint64 `json:"verify_errors"`
			}
			line := sp.last(t)
			require.NoError(t, json.Unmarshal([]byte(line), &rep), "subscriber %d: %q", i, line)
			t.Logf("%s: subscriber %d received %d, missed %d in %d gaps", provider, i, rep.Messages, rep.Missed, rep.Gaps)
			assert.Equal(t, uint64(6000*tags), rep.Messages+rep.Missed, "subscriber %d: every number received or missed", i)
			assert.GreaterOrEqual(t, rep.Missed, uint64(1000*tags), "subscriber %d: at least the numbers skipped", i)
			assert.Greater(t, rep.Messages, uint64(1000*tags), "subscriber %d: some of the first run", i)
			assert.GreaterOrEqual(t, rep.Messages, uint64(1000*tags), "subscriber %d: the whole second run", i)
			assert.Positive(t, rep.Gaps)
			assert.Zero(t, rep.Resets+rep.VerifyErrors, "subscriber %d", i)
			assert.Contains(t, sp.err.String(), "restored", "subscriber %d resubscribed by itself", i)
		}
		second.last(t)
	})
}
