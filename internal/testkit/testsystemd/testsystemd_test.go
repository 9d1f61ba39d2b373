package testsystemd

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
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
