package critest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Service is a process started as a systemd unit file on a test root
// says (its ExecStart), with the host paths mapped into the root: the
// stand-in for a service berth installs and a test machine's missing
// systemd would run.
type Service struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer
}

// Write collects the service's output (its journal).
func (s *Service) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// Log is what the service printed since its last start.
func (s *Service) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Start runs the ExecStart of unitFile (a path on this machine) with
// every absolute argument mapped under root, and extra appended: a
// socket under the root's run/ is then the same socket in the namespace
// of a containerd that StartOnRoot runs, which binds the root's run/
// directories into its /run. The socket is the argument after
// --address; Start returns once it exists, an error when the process
// exits first, and nil after five seconds without either (a Type=simple
// service is active once started, whether it serves or not).
func (s *Service) Start(root, unitFile string, extra ...string) error {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		return err
	}
	var args []string
	for l := range strings.Lines(string(unit)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "ExecStart="); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("%s has no ExecStart", unitFile)
	}
	sock := ""
	for i, a := range args {
		if strings.HasPrefix(a, "/") {
			args[i] = filepath.Join(root, a)
		}
		if i > 0 && args[i-1] == "--address" {
			sock = args[i]
		}
	}
	if sock != "" {
		if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
			return err
		}
	}
	args = append(args, extra...)
	cmd := exec.Command(args[0], args[1:]...)
	s.mu.Lock()
	s.out.Reset()
	s.mu.Unlock()
	cmd.Stdout, cmd.Stderr = s, s
	// Its own process group, killed whole by Stop; Pdeathsig so that a
	// test binary killed before its cleanup does not leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %v", args[0], cmd.ProcessState)
		default:
		}
		if sock == "" {
			continue
		}
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
	}
	return nil
}

// Stop kills the service, if it runs, and waits for it.
func (s *Service) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}
