// Package testbin builds the programs that integration tests run as
// processes (cmd/netio-perf, the C peers) once per test binary rather than
// once per test: a Go link of netio-perf takes seconds, more on a busy
// machine, and a package's tests all run the same binary.
//
// A Program is built on the first Path call, into a temporary directory
// that Remove deletes; the test package's TestMain calls Remove after
// m.Run. Every later Path returns the same file, or the same build error.
// The build inherits the test's environment, so GOEXPERIMENT=cgocheck2
// reaches a Go program the tests build.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Program is one program to build once; its zero value is not usable, make
// one with Go or C.
type Program struct {
	name  string
	build func(out string) (skip string, err error)

	once sync.Once
	dir  string
	path string
	skip string // why the program cannot be built here
	err  error
}

// Go returns the Go command importPath, built with the go tool found on
// PATH from directory dir (a directory inside the module).
func Go(name, dir, importPath string) *Program {
	return &Program{name: name, build: func(out string) (string, error) {
		goTool, err := exec.LookPath("go")
		if err != nil {
			return "", fmt.Errorf("the go tool is needed to build %s: %w", importPath, err)
		}
		cmd := exec.Command(goTool, "build", "-o", out, importPath)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w: %s", importPath, err, b)
		}
		return "", nil
	}}
}

// C returns the C program compiled from source with cc, extra flags and
// libfabric's pkg-config flags. Without cc or pkg-config, Path skips the
// test and says why.
func C(name, source string, flags ...string) *Program {
	return &Program{name: name, build: func(out string) (string, error) {
		for _, tool := range []string{"cc", "pkg-config"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Sprintf("%s needs %s to build %s: %v", name, tool, source, err), nil
			}
		}
		lib, err := exec.Command("pkg-config", "--cflags", "--libs", "libfabric").Output()
		if err != nil {
			return "", fmt.Errorf("pkg-config libfabric: %w", err)
		}
		args := append(append(append([]string{}, flags...), "-o", out, source), strings.Fields(string(lib))...)
		if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("cc %s: %w: %s", source, err, b)
		}
		return "", nil
	}}
}

// Path builds the program on its first call and returns its path. It
// fails t when the build failed, and skips t when a tool is missing.
func (p *Program) Path(t testing.TB) string {
	t.Helper()
	p.once.Do(func() {
		if p.dir, p.err = os.MkdirTemp("", "netio-testbin-"); p.err != nil {
			return
		}
		p.path = filepath.Join(p.dir, p.name)
		p.skip, p.err = p.build(p.path)
	})
	if p.skip != "" {
		t.Skip(p.skip)
	}
	if p.err != nil {
		t.Fatalf("building %s: %v", p.name, p.err)
	}
	return p.path
}

// Remove deletes what Path built; call it from TestMain after m.Run.
func (p *Program) Remove() {
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}
