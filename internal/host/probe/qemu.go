package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"berth.dev/berth/internal/host/facts"
)

// DefaultQEMUTimeout bounds the whole QEMU probe: start, QMP session, quit.
// A healthy QEMU answers in about 50 ms.
const DefaultQEMUTimeout = 5 * time.Second

// QEMUArgs are the arguments of the probe: no guest, no devices, no display,
// CPUs stopped, QMP on stdio. KVM is asked for first so that query-kvm says
// whether this QEMU can really use it (without -accel QEMU defaults to TCG
// and reports KVM disabled even on a KVM host); TCG is the fallback so that
// QEMU still starts and answers where KVM is unusable.
var qemuArgs = []string{
	"-machine", "none",
	"-accel", "kvm", "-accel", "tcg",
	"-nodefaults", "-display", "none", "-S",
	"-qmp", "stdio",
}

// QEMUArgs returns the arguments the probe gives QEMU (for documentation
// and tests).
func QEMUArgs() []string { return slices.Clone(qemuArgs) }

// confidentialInterface is the QOM interface every confidential-guest object
// type implements (sev-guest, sev-snp-guest, tdx-guest).
const confidentialInterface = "confidential-guest-support"

// maxStderr is how much of QEMU's stderr is kept for error messages.
const maxStderr = 4 << 10

// QEMU starts binary (an absolute path on this machine) headless with no
// guest, asks it over QMP for its version, KVM state, confidential-guest
// types and SEV capabilities, and makes it quit. The process runs in its own
// process group, which is killed at the timeout (default
// DefaultQEMUTimeout) and once more after QEMU exits, and is always reaped.
// The returned probe is never nil; err is set when QEMU did not complete
// the session (probe.Error says the same).
func QEMU(ctx context.Context, binary string, timeout time.Duration) (p *facts.QEMUProbe, err error) {
	if timeout <= 0 {
		timeout = DefaultQEMUTimeout
	}
	start := time.Now()
	p = &facts.QEMUProbe{Binary: binary}
	defer func() {
		p.DurationMS = time.Since(start).Milliseconds()
		if err != nil {
			p.Error = err.Error()
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, qemuArgs...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
	cmd.Dir = "/"
	// Its own group, which Cancel kills whole; and killed with berth if
	// berth dies first (a read-only check does not subscribe to signals:
	// cli.AnnotationEarlyStart). The parent-death signal follows the
	// thread that started QEMU, and berth never ends a thread before it
	// exits (nothing locks one).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Pipes held open by a stray child must not keep Wait waiting.
	cmd.WaitDelay = 100 * time.Millisecond
	stderr := &headBuffer{max: maxStderr}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return p, fmt.Errorf("qemu probe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return p, fmt.Errorf("qemu probe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return p, fmt.Errorf("qemu probe: starting %s: %w", binary, err)
	}
	pgid := cmd.Process.Pid

	sessErr := session(NewClient(stdout, stdin), p)
	stdin.Close()
	if sessErr != nil {
		// No point waiting for a QEMU that does not talk.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	waitErr := cmd.Wait()
	// Anything QEMU forked is gone with the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && sessErr != nil:
		return p, fmt.Errorf("qemu probe: %s timed out after %s", binary, timeout)
	case ctx.Err() != nil && sessErr != nil:
		return p, fmt.Errorf("qemu probe: %s: %w", binary, ctx.Err())
	case sessErr != nil:
		return p, fmt.Errorf("qemu probe: %s: %w%s", binary, sessErr, describeExit(waitErr, stderr.String()))
	}
	p.Ran = true
	return p, nil
}

// session runs the QMP conversation and fills p. Only a broken channel is
// an error; error replies to single queries are recorded.
func session(c *Client, p *facts.QEMUProbe) error {
	if _, err := c.Handshake(); err != nil {
		return err
	}
	var v VersionInfo
	if err := c.Execute("query-version", nil, &v); err != nil {
		return err
	}
	p.Version, p.Package = v.String(), strings.TrimSpace(v.Package)

	var kvm struct {
		Enabled bool `json:"enabled"`
		Present bool `json:"present"`
	}
	if err := c.Execute("query-kvm", nil, &kvm); err != nil {
		return err
	}
	p.KVMPresent, p.KVMEnabled = kvm.Present, kvm.Enabled

	var types []struct {
		Name string `json:"name"`
	}
	args := map[string]any{"implements": confidentialInterface, "abstract": false}
	if err := c.Execute("qom-list-types", args, &types); err != nil {
		return err
	}
	p.ConfidentialTypes = nil
	for _, t := range types {
		p.ConfidentialTypes = append(p.ConfidentialTypes, t.Name)
	}
	slices.Sort(p.ConfidentialTypes)

	// Only QEMU builds with SEV support know the command; the others and
	// hosts without SEV answer with an error, which is the fact we keep.
	var sev map[string]any
	err := c.Execute("query-sev-capabilities", nil, &sev)
	var qerr *QMPError
	switch {
	case err == nil:
		p.SEVCapabilities = true
	case errors.As(err, &qerr):
		p.SEVError = qerr.Desc
	default:
		return err
	}

	// quit answers and then closes the channel; a lost answer is fine.
	if err := c.Execute("quit", nil, nil); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return nil
}

// describeExit adds how QEMU ended and what it said, for error messages.
func describeExit(waitErr error, stderr string) string {
	var b strings.Builder
	if waitErr != nil {
		b.WriteString(" (" + waitErr.Error() + ")")
	}
	if s := strings.TrimSpace(stderr); s != "" {
		b.WriteString(": " + s)
	}
	return b.String()
}

// headBuffer keeps the first max bytes written and discards the rest
// without blocking the writer.
type headBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}
