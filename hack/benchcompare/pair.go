package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// A pair is one measurement between two processes: a server started first,
// then a client that connects to it; both must exit 0. The harness learns
// the server's address from its "LISTENING ip:port" line, or, for a
// program that prints none (fabtests), picks a free port, passes it and
// waits until the kernel lists the port as listening (/proc/net/tcp), so
// that no probe connection disturbs the server.

// command is a program and its arguments.
type command struct {
	prog string
	args []string
}

func (c command) String() string { return c.prog + " " + strings.Join(c.args, " ") }

// pairSpec says how to run one pair. With port > 0 the server is told the
// port and prints no LISTENING line; client gets the address to connect to.
type pairSpec struct {
	server command
	client func(addr string) command
	port   int
}

// pairOutput is what a pair left: both standard outputs, and the CPU time
// (user + system) both processes used in all, set-up included.
type pairOutput struct {
	server, client []byte
	cpu            time.Duration
}

// listeningPrefix starts the line a server prints when it listens.
const listeningPrefix = "LISTENING "

// runPair runs a pair within the per-process timeout.
func (t tools) runPair(ctx context.Context, p pairSpec) (pairOutput, error) {
	var out pairOutput
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	srv := exec.CommandContext(ctx, p.server.prog, p.server.args...)
	var srvErr bytes.Buffer
	srv.Stderr, srv.WaitDelay = &srvErr, time.Second
	pipe, err := srv.StdoutPipe()
	if err != nil {
		return out, err
	}
	if err := srv.Start(); err != nil {
		return out, fmt.Errorf("%s: %w", p.server, err)
	}
	lines := make(chan string, 1)
	var srvOut bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), listeningPrefix); ok && srvOut.Len() == 0 {
				lines <- addr
			}
			srvOut.Write(append(sc.Bytes(), '\n'))
		}
		_, _ = io.Copy(io.Discard, pipe)
		close(lines)
	}()
	addr, err := t.serverAddr(ctx, p.port, lines)
	if err != nil {
		cancel()
		<-copied
		_ = srv.Wait()
		return out, fmt.Errorf("%s: %w: %s", p.server, err, lastLine(srvErr.Bytes()))
	}
	cli := p.client(addr)
	cliCmd := exec.CommandContext(ctx, cli.prog, cli.args...)
	var cliOut, cliErr bytes.Buffer
	cliCmd.Stdout, cliCmd.Stderr, cliCmd.WaitDelay = &cliOut, &cliErr, time.Second
	cliRun := cliCmd.Run()
	if cliRun != nil {
		cancel() // the server would wait for a client that is gone
	}
	<-copied
	srvRun := srv.Wait()
	out.server, out.client = srvOut.Bytes(), cliOut.Bytes()
	out.cpu = cpuOf(srv.ProcessState) + cpuOf(cliCmd.ProcessState)
	switch {
	case cliRun != nil:
		return out, fmt.Errorf("%s: %w: %s", cli, cliRun, lastLine(cliErr.Bytes()))
	case srvRun != nil:
		return out, fmt.Errorf("%s: %w: %s", p.server, srvRun, lastLine(srvErr.Bytes()))
	}
	return out, nil
}

// serverAddr returns where the server listens: its LISTENING line, or with
// port > 0 127.0.0.1:port once the kernel lists the port as listening.
func (t tools) serverAddr(ctx context.Context, port int, lines <-chan string) (string, error) {
	if port > 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), waitListening(ctx, "/proc/net/tcp", port)
	}
	select {
	case addr, ok := <-lines:
		if !ok {
			return "", errors.New("exited before it listened")
		}
		return addr, nil
	case <-ctx.Done():
		return "", fmt.Errorf("no %sline: %w", listeningPrefix, context.Cause(ctx))
	}
}

// cpuOf returns the user + system time of a process that ran, else 0.
func cpuOf(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// freePort returns a TCP port on 127.0.0.1 no one listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening polls a /proc/net/tcp file until it lists a socket in the
// LISTEN state on 127.0.0.1:port, or the context ends.
func waitListening(ctx context.Context, path string, port int) error {
	want := fmt.Sprintf("0100007F:%04X", port)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil && listensOn(data, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %d never listened: %w", port, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// listensOn reports whether a /proc/net/tcp table has a LISTEN (state 0A)
// socket whose local address is local (hex IP:PORT as the kernel writes it).
func listensOn(table []byte, local string) bool {
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[3] == "0A" {
			return true
		}
	}
	return false
}

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
