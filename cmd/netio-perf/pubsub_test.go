package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPublishSubscribeInProcess runs a publisher and two subscribers with
// different tag sets; every message is delivered and verified, and both
// sides' JSON reports agree.
func TestPublishSubscribeInProcess(t *testing.T) {
	t.Run("buffered", func(t *testing.T) { publishSubscribeInProcess(t, "buffered") })
	t.Run("shared", func(t *testing.T) { publishSubscribeInProcess(t, "shared", "--shared") })
}

func publishSubscribeInProcess(t *testing.T, mode string, flags ...string) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pub := startListening(t, ctx, "publish", append([]string{"--tags", "4", "--size", "128", "--count", "20000",
		"--subscribers", "2", "--verify", "--json"}, flags...)...)
	var wg sync.WaitGroup
	reports := make([]subReport, 2)
	for i, tc := range []struct{ tags, count string }{{"0-3", "20000"}, {"1,3", "10000"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errOut bytes.Buffer
			code := run(ctx, []string{"subscribe", "--connect", pub.addr, "--tags", tc.tags, "--count", tc.count,
				"--verify", "--json"}, &out, &errOut)
			if !assert.Equal(t, exitOK, code, "subscriber %d: %s", i, errOut.String()) {
				return
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			assert.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &reports[i]))
		}()
	}
	wg.Wait()
	for i, want := range []uint64{20000, 10000} {
		r := reports[i]
		assert.Equal(t, "subscribe", r.Role)
		assert.Equal(t, want, r.Messages, "subscriber %d", i)
		assert.Equal(t, want*128, r.Bytes, "subscriber %d", i)
		assert.Zero(t, r.Gaps+r.Missed+r.VerifyErrors, "subscriber %d", i)
	}
	code, last := pub.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	var p pubReport
	require.NoError(t, json.Unmarshal([]byte(last), &p), last)
	assert.Equal(t, uint64(20000), p.Published)
	assert.Equal(t, mode, p.Mode)
	assert.Zero(t, p.NoSubscriptions)
	require.Len(t, p.Subscribers, 2)
	var delivered uint64
	for _, s := range p.Subscribers {
		delivered += s.Delivered
		assert.Zero(t, s.Dropped)
		assert.Equal(t, "block", s.Policy)
	}
	assert.Equal(t, uint64(30000), delivered)
}

func TestSweepPubsubMode(t *testing.T) {
	r, progress := runSweepJSON(t, "--mode", "pubsub", "--quick", "--sizes", "64", "--conns", "1,2")
	require.Len(t, r.Rows, 2)
	for i, subs := range []int{1, 2} {
		row := r.Rows[i]
		assert.Equal(t, subs, row.Connections)
		assert.Equal(t, 64, row.Size)
		assert.Positive(t, row.Sent)
		assert.Equal(t, row.Sent*uint64(subs), row.Messages)
		assert.Positive(t, row.MsgsPerS)
	}
	assert.Contains(t, progress, "sweep: pubsub 2 subscribers, 64 B")
}

func TestParseTagList(t *testing.T) {
	got, err := parseTagList("5,0-2, 9 ,1")
	require.NoError(t, err)
	assert.Equal(t, []uint64{0, 1, 2, 5, 9}, got)
	for _, bad := range []string{"", "x", "3-1", "1-", "-1", "0-70000", "18446744073709551616"} {
		_, err := parseTagList(bad)
		assert.Error(t, err, bad)
	}
}

func TestPubsubUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"publish", "--tags", "0"},
		{"publish", "--count", "0"},
		{"publish", "--policy", "maybe"},
		{"publish", "--verify", "--size", "8"},
		{"publish", "--immediate", "--shared"},
		{"subscribe", "--tags", "1"},
		{"subscribe", "--connect", "127.0.0.1:1"},
		{"subscribe", "--connect", "127.0.0.1:1", "--tags", "x"},
		{"subscribe", "--connect", "127.0.0.1:1", "--tags", "1", "--churn", "-1"},
		{"subscribe", "--connect", "127.0.0.1:1", "--tags", "1", "--stall-after", "5", "--stall", "-1s"},
		{"--mode", "coalesce", "--conns", "1"},
	} {
		var errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &bytes.Buffer{}, &errOut), "%v", args)
		assert.Contains(t, errOut.String(), "usage:", "%v", args)
	}
}
