package platform

import (
	"strings"
	"testing"
)

// TestCheckServiceName holds the unit name rules to systemd's
// unit_name_is_valid: the names distributions use pass, and every name
// that would carry a line, a word or a shell construct of its own into
// a D-Bus call or a printed command is refused.
func TestCheckServiceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"containerd.service", true},
		{"snap.microk8s.daemon-containerd.service", true},
		{"rke2-agent.service", true},
		{"containerd@node\\x2d1.service", true},
		{"getty@tty1.service", true},
		{strings.Repeat("a", 247) + ".service", true}, // 255 bytes
		{strings.Repeat("a", 248) + ".service", false},
		{"", false},
		{"containerd", false},
		{"containerd.socket", false}, // a unit, not a service
		{"containerd.servic", false},
		{".service", false},
		{"containerd@.service", false}, // a template
		{"container d.service", false},
		{"containerd.service\nExecStartPre=/bin/sh", false},
		{"containerd.service; rm -rf /", false},
		{"$(id).service", false},
		{"`id`.service", false},
		{"containerd\t.service", false},
		{"contai\x1b[2Kerd.service", false},
		{"cont\xffainerd.service", false},
		{"../containerd.service", false},
		{"containerd/x.service", false},
	} {
		err := CheckServiceName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckServiceName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestCustomLayoutRefusesHostile: a custom layout names the flag whose
// value carries a control character or is not a service unit.
func TestCustomLayoutRefusesHostile(t *testing.T) {
	for _, tc := range []struct {
		config, socket, unit, want string
	}{
		{"/etc/c.toml", "", "containerd.service\nExecStartPre=/bin/sh", "--runtime-unit"},
		{"/etc/c.toml", "", "containerd", "--runtime-unit"},
		{"/etc/c.toml\n[x]", "", "containerd.service", "--containerd-config"},
		{"/etc/c.toml", "/run/c.sock\r", "containerd.service", "--runtime-socket"},
	} {
		_, err := CustomLayout(Containerd, tc.config, tc.socket, tc.unit)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CustomLayout(%q, %q, %q) = %v, want an error naming %s", tc.config, tc.socket, tc.unit, err, tc.want)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("error carries the control character raw: %q", err)
		}
	}
	if _, err := CustomLayout(Containerd, "/etc/c.toml", "", "containerd.service"); err != nil {
		t.Fatal(err)
	}
}
