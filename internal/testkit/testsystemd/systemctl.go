package testsystemd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Systemctl serves units to stand-ins for the host's systemctl and
// journalctl: executables in Dir that hand each call to the test through
// a FIFO and print its answer, so that the code under test runs real
// commands, with their argv, exit codes and output, while the units
// restarted are the test's real processes. Build it with StartSystemctl.
type Systemctl struct {
	// Dir holds the executables systemctl and journalctl.
	Dir string

	units map[string]*unit
	calls *os.File
	mu    sync.Mutex
	argv  [][]string
	wg    sync.WaitGroup
}

// standIn is the script of both commands: it sends "pid name args" to the
// test and prints what comes back on its own FIFO, whose first line is
// the exit code and the stream (1 or 2) of the rest.
const standIn = `#!/bin/sh
d=%q
r="$d/resp.$$"
mkfifo "$r" || exit 70
printf '%%s %%s\n' "$$" "%s $*" > "$d/calls"
{ read -r code fd; if [ "$fd" = 2 ]; then cat >&2; else cat; fi; } < "$r"
rm -f "$r"
exit "$code"
`

// StartSystemctl starts every unit not Running (failing the test if one
// does not start) and writes the stand-ins into dir. Everything stops at
// the test's cleanup.
func StartSystemctl(t testing.TB, dir string, units ...Unit) *Systemctl {
	t.Helper()
	s := &Systemctl{Dir: dir, units: startUnits(t, units)}
	fifo := filepath.Join(dir, "calls")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("testsystemd: %v", err)
	}
	// Read and write: the FIFO never reads end-of-file between two calls.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("testsystemd: %v", err)
	}
	s.calls = f
	for _, name := range []string{"systemctl", "journalctl"} {
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, standIn, dir, name), 0o755); err != nil {
			t.Fatalf("testsystemd: %v", err)
		}
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

// Path is the path of the stand-in for name (systemctl, journalctl).
func (s *Systemctl) Path(name string) string { return filepath.Join(s.Dir, name) }

// Close stops serving and stops the units.
func (s *Systemctl) Close() {
	s.calls.Close()
	s.wg.Wait()
	stopUnits(s.units)
}

// Calls are the argv of every call so far, the command's name first.
func (s *Systemctl) Calls() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.argv...)
}

// Restarts is how often systemctl restart restarted the unit.
func (s *Systemctl) Restarts(name string) int { return restarts(s.units, name) }

// Enabled reports whether the unit is enabled.
func (s *Systemctl) Enabled(name string) bool { return enabled(s.units, name) }

// Reloads is how often daemon-reload ran.
func (s *Systemctl) Reloads() int { return reloads(s.units) }

// State is the unit's ActiveState.
func (s *Systemctl) State(name string) string { return s.units[name].activeState() }

func (s *Systemctl) serve() {
	defer s.wg.Done()
	sc := bufio.NewScanner(s.calls)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		s.mu.Lock()
		s.argv = append(s.argv, f[1:])
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			code, stream, out := s.answer(f[1], f[2:])
			resp, err := s.openAnswer(filepath.Join(s.Dir, "resp."+f[0]))
			if err != nil {
				return
			}
			defer resp.Close()
			fmt.Fprintf(resp, "%d %d\n%s", code, stream, out)
		}()
	}
}

// openAnswer opens a caller's FIFO once the caller reads it. It does not
// block in open(2): a caller killed before it reads (its command timed
// out) must not keep Close waiting; it gives up after answerWait.
func (s *Systemctl) openAnswer(path string) (*os.File, error) {
	deadline := time.Now().Add(answerWait)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			return f, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answerWait bounds how long a caller may take to read its answer.
const answerWait = 30 * time.Second

// answer is what systemctl or journalctl would say: the exit code, the
// stream written and its text.
func (s *Systemctl) answer(cmd string, args []string) (code, stream int, out string) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch {
	case cmd == "journalctl" && arg(0) == "-u":
		if u := s.units[arg(1)]; u != nil && u.Log != nil {
			return 0, 1, u.Log()
		}
		return 0, 1, ""
	case cmd == "systemctl" && arg(0) == "daemon-reload":
		reloadUnits(s.units)
		return 0, 1, ""
	case cmd == "systemctl" && (arg(0) == "enable" || arg(0) == "disable"):
		name := arg(1)
		u := s.units[name]
		if u == nil {
			return 1, 2, "Failed to " + arg(0) + " unit: Unit file " + name + " does not exist.\n"
		}
		if why := u.setEnabled(arg(0) == "enable"); why != "" {
			return 1, 2, "Failed to " + arg(0) + " unit: " + why + "\n"
		}
		return 0, 1, ""
	case cmd == "systemctl" && (arg(0) == "start" || arg(0) == "stop"):
		name := arg(1)
		u := known(s.units, name)
		if u == nil {
			return 5, 2, "Failed to " + arg(0) + " " + name + ": Unit " + name + " not found.\n"
		}
		run := u.start
		if arg(0) == "stop" {
			run = u.stop
		}
		if run() != "done" {
			return 1, 2, "Job for " + name + " failed because the control process exited with error code.\n" +
				"See \"systemctl status " + name + "\" and \"journalctl -xeu " + name + "\" for details.\n"
		}
		return 0, 1, ""
	case cmd == "systemctl" && arg(0) == "is-active":
		u := s.units[arg(1)]
		if u == nil {
			return 3, 1, "inactive\n"
		}
		st := u.activeState()
		if st == "active" {
			return 0, 1, st + "\n"
		}
		return 3, 1, st + "\n"
	case cmd == "systemctl" && arg(0) == "restart":
		name := arg(1)
		u := known(s.units, name)
		if u == nil {
			return 5, 2, "Failed to restart " + name + ": Unit " + name + " not found.\n"
		}
		if u.restart() != "done" {
			return 1, 2, "Job for " + name + " failed because the control process exited with error code.\n" +
				"See \"systemctl status " + name + "\" and \"journalctl -xeu " + name + "\" for details.\n"
		}
		return 0, 1, ""
	}
	return 1, 2, "Unknown command verb " + strconv.Quote(arg(0)) + ".\n"
}
