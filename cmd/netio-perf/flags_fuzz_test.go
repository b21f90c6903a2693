package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
)

// FuzzParseSize: a size from the command line is refused with an error or
// is a byte count in 1..1 GiB that formatSize renders back into text
// parseSize reads as the same count.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64", "4K", "4kib", "1MiB", " 2 K ", "1G", "", "0", "-1", "2G", "1.5K", "9999999999999999999", "64B", "kib"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			if n != 0 {
				t.Errorf("parseSize(%q) failed but returned %d", s, n)
			}
			return
		}
		if n < 1 || n > gib {
			t.Fatalf("parseSize(%q) = %d, outside 1..1GiB", s, n)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Errorf("parseSize(%q) = %d, formatted %q, parsed back %d, %v", s, n, formatSize(n), back, err)
		}
	})
}

// FuzzParseLists: a comma-separated list of sizes or counts is all valid
// or refused as a whole, with one value per comma-separated part.
func FuzzParseLists(f *testing.F) {
	for _, s := range []string{"64,1K,1M", "1,4,16,64", "", ",", "1,,2", "64,x", " 8 , 16 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts := strings.Split(s, ",")
		if sizes, err := parseSizes(s); err == nil {
			if len(sizes) != len(parts) {
				t.Errorf("parseSizes(%q) = %v: %d parts", s, sizes, len(parts))
			}
			for i, n := range sizes {
				if want, err := parseSize(parts[i]); err != nil || n != want {
					t.Errorf("parseSizes(%q)[%d] = %d, parseSize(%q) = %d, %v", s, i, n, parts[i], want, err)
				}
			}
		} else if sizes != nil {
			t.Errorf("parseSizes(%q) failed but returned %v", s, sizes)
		}
		const most = 64
		if counts, err := parseCounts(s, most); err == nil {
			if len(counts) != len(parts) {
				t.Errorf("parseCounts(%q) = %v: %d parts", s, counts, len(parts))
			}
			for _, n := range counts {
				if n < 1 || n > most {
					t.Errorf("parseCounts(%q) accepted %d, outside 1..%d", s, n, most)
				}
			}
		} else if counts != nil {
			t.Errorf("parseCounts(%q) failed but returned %v", s, counts)
		}
	})
}

// FuzzParseHostPort: an address from the command line is refused, or is
// an IP address and a port in range whose String parses back to the same
// address.
func FuzzParseHostPort(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7000", "localhost:0", "[::1]:9", "", "nohostport", "1.2.3.4:99999", "[::1", "host:-1", ":80", "10.0.0.1:+1"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, allowZero bool) {
		a, err := parseHostPort(s, allowZero)
		if err != nil {
			if a != (hostPort{}) {
				t.Errorf("parseHostPort(%q) failed but returned %v", s, a)
			}
			return
		}
		if net.ParseIP(a.IP) == nil || a.Port < 0 || a.Port > 65535 || (a.Port == 0 && !allowZero) {
			t.Fatalf("parseHostPort(%q, %v) = %+v", s, allowZero, a)
		}
		if back, err := parseHostPort(a.String(), allowZero); err != nil || back != a {
			t.Errorf("parseHostPort(%q) = %+v, String %q parses to %+v, %v", s, a, a.String(), back, err)
		}
	})
}

// FuzzCommandLine feeds whole command lines (arguments separated by
// spaces) to the three modes' flag parsers: none panics, every error is a
// usage error (exit status 2) or a request for help, and options that
// parse are within the limits the modes rely on.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{
		"--listen 127.0.0.1:0 --bufs 8 --buf-size 64K --count 10 --verify",
		"--connect 127.0.0.1:7000 --size 4K --count 1 --bufs 4 --zero-copy --timeout 1s",
		"--mode scale --conns 1,4 --sizes 1K --window 8 --rx-bufs 16 --duration 300ms",
		"--bufs -1", "-h", "--timeout -1s", "extra", "--listen", "--sizes 64,x", "--provider sockets --poll busy",
		"--endpoint rdm --connect 127.0.0.1:7000 --inject --size 64", "--endpoint rdm --provider shm --connect fi_shm://1:0:0",
		"--endpoint rdm --provider shm --listen x", "--endpoint dgram",
		"--plot a.svg --sizes 64", "--plot a.gif", "--progress on --progress-interval 10ms", "--progress on --json",
		"--log-level debug", "--log-level x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		check := func(mode string, err error) bool {
			if err != nil && !errors.Is(err, errUsage) && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s %q: %v is neither a usage error nor help", mode, args, err)
			}
			return err == nil
		}
		if o, err := parseServerFlags(args, io.Discard); check("server", err) {
			if o.bufs < 1 || o.timeout < 0 || o.bufSize < 1 || o.bufSize > gib || o.progress.check(o.json) != nil {
				t.Errorf("server %q: %+v", args, o)
			}
		}
		if o, err := parseClientFlags(args, io.Discard); check("client", err) {
			if o.bufs < 1 || o.timeout < 0 || o.size < 1 || o.size > gib || (o.connect.Port < 1 && o.addr == "") || o.progress.check(o.json) != nil {
				t.Errorf("client %q: %+v", args, o)
			}
		}
		if o, err := parseSweepFlags(args, io.Discard); check("sweep", err) {
			if len(o.sizes) == 0 || len(o.conns) == 0 || o.window < 0 || o.rxBufs < 0 || o.duration < 0 || o.checkPlot() != nil {
				t.Errorf("sweep %q: %+v", args, o)
			}
		}
	})
}
