package testsystemd

import (
	"bufio"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAuthentication: the supervisor admits, as systemd's private socket
// does, only a peer whose EXTERNAL identity is its own uid (or left to
// the socket's credentials), and answers nothing before BEGIN.
func TestAuthentication(t *testing.T) {
	sock := filepath.Join(ShortDir(t), "private")
	Start(t, sock, Unit{Name: "containerd.service", Start: func() error { return nil }, Stop: func() {}})
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	me := hex.EncodeToString([]byte(strconv.Itoa(os.Geteuid())))
	other := hex.EncodeToString([]byte(strconv.Itoa(os.Geteuid() + 1000)))
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
	}{
		{"own uid", []string{"AUTH EXTERNAL " + me}, []string{"OK "}},
		{"socket credentials", []string{"AUTH EXTERNAL", "DATA"}, []string{"DATA", "OK "}},
		{"another uid", []string{"AUTH EXTERNAL " + other}, []string{"REJECTED EXTERNAL"}},
		{"another mechanism", []string{"AUTH ANONYMOUS"}, []string{"REJECTED EXTERNAL"}},
		{"list mechanisms", []string{"AUTH"}, []string{"REJECTED EXTERNAL"}},
		{"BEGIN before OK", []string{"BEGIN"}, []string{"ERROR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			for i, l := range tc.lines {
				if _, err := c.Write([]byte(l + "\r\n")); err != nil {
					t.Fatal(err)
				}
				got, err := r.ReadString('\n')
				if err != nil || !strings.HasPrefix(got, tc.want[i]) {
					t.Fatalf("after %q: %q, %v; want %q", l, got, err, tc.want[i])
				}
			}
		})
	}
}

// TestSystemctlStandIn runs the stand-ins as a program would: what each
// command prints, on which stream, with which exit code, and the argv
// recorded.
func TestSystemctlStandIn(t *testing.T) {
	up := true
	snapFile := filepath.Join(t.TempDir(), "snap.service")
	snapRuns := false
	s := StartSystemctl(t, t.TempDir(),
		Unit{Name: "snap.service", Inactive: true, File: snapFile,
			Start: func() error { snapRuns = true; return nil }, Stop: func() { snapRuns = false }},
		Unit{Name: "containerd.service", Start: func() error { return nil }, Stop: func() {}, Log: func() string { return "level=error msg=x\n" }},
		Unit{Name: "broken.service", Start: func() error {
			if !up {
				return errors.New("exit status 1")
			}
			return nil
		}, Stop: func() {}},
	)
	for _, tc := range []struct {
		cmd            string
		args           []string
		code           int
		stdout, stderr string
		// before runs first (writes the unit file).
		before func()
	}{
		{"systemctl", []string{"is-active", "containerd.service"}, 0, "active\n", "", nil},
		{"systemctl", []string{"is-active", "crio.service"}, 3, "inactive\n", "", nil},
		{"systemctl", []string{"restart", "containerd.service"}, 0, "", "", nil},
		{"systemctl", []string{"restart", "crio.service"}, 5, "", "Failed to restart crio.service: Unit crio.service not found.\n", nil},
		{"systemctl", []string{"restart", "broken.service"}, 1, "", "Job for broken.service failed because the control process exited with error code.\nSee \"systemctl status broken.service\" and \"journalctl -xeu broken.service\" for details.\n", nil},
		{"systemctl", []string{"is-active", "broken.service"}, 3, "failed\n", "", nil},
		{"systemctl", []string{"mask", "containerd.service"}, 1, "", "Unknown command verb \"mask\".\n", nil},
		// A unit systemd knows once a reload found its file.
		{"systemctl", []string{"start", "snap.service"}, 5, "", "Failed to start snap.service: Unit snap.service not found.\n", nil},
		{"systemctl", []string{"enable", "snap.service"}, 1, "", "Failed to enable unit: Unit file snap.service does not exist.\n", nil},
		{"systemctl", []string{"start", "snap.service"}, 5, "", "Failed to start snap.service: Unit snap.service not found.\n", func() {
			if err := os.WriteFile(snapFile, []byte("[Service]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"systemctl", []string{"daemon-reload"}, 0, "", "", nil},
		{"systemctl", []string{"enable", "snap.service"}, 0, "", "", nil},
		{"systemctl", []string{"start", "snap.service"}, 0, "", "", nil},
		{"systemctl", []string{"is-active", "snap.service"}, 0, "active\n", "", nil},
		{"systemctl", []string{"stop", "snap.service"}, 0, "", "", nil},
		{"systemctl", []string{"disable", "snap.service"}, 0, "", "", nil},
		{"systemctl", []string{"is-active", "snap.service"}, 3, "inactive\n", "", nil},
		{"journalctl", []string{"-u", "containerd.service", "-o", "cat"}, 0, "level=error msg=x\n", "", nil},
		{"journalctl", []string{"-u", "crio.service"}, 0, "", "", nil},
	} {
		t.Run(strings.Join(append([]string{tc.cmd}, tc.args...), " "), func(t *testing.T) {
			up = len(tc.args) < 2 || tc.args[1] != "broken.service"
			if tc.before != nil {
				tc.before()
			}
			var stdout, stderr strings.Builder
			c := exec.Command(s.Path(tc.cmd), tc.args...)
			c.Stdout, c.Stderr = &stdout, &stderr
			err := c.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	if s.Enabled("snap.service") || snapRuns || s.Reloads() != 1 {
		t.Errorf("snap.service: enabled %v, running %v, %d reloads; want disabled, stopped, 1", s.Enabled("snap.service"), snapRuns, s.Reloads())
	}
	if got := s.Restarts("containerd.service"); got != 1 {
		t.Errorf("%d restarts of containerd.service, want 1", got)
	}
	if calls := s.Calls(); len(calls) != 19 || strings.Join(calls[0], " ") != "systemctl is-active containerd.service" {
		t.Errorf("calls: %q", calls)
	}
}
