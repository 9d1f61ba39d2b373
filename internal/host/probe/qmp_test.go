package probe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseMessage(t *testing.T) {
	tests := []struct {
		name, line string
		want       string // "greeting", "return", "error", "event"
		wantErr    string
	}{
		{"greeting", `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}`, "greeting", ""},
		{"return", `{"return": {"enabled": false, "present": true}}`, "return", ""},
		{"empty return", `{"return": {}}`, "return", ""},
		{"error", `{"error": {"class": "GenericError", "desc": "KVM not enabled"}}`, "error", ""},
		{"event", `{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "SHUTDOWN", "data": {"guest": false}}`, "event", ""},
		{"not json", `hello`, "", "expected a JSON object"},
		{"array", `[1]`, "", "expected a JSON object"},
		{"empty object", `{}`, "", "not exactly one"},
		{"two kinds", `{"return": {}, "event": "X"}`, "", "not exactly one"},
		{"broken", `{"return": `, "", "decoding"},
		{"return null", `{"return": null}`, "return", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMessage([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err=%v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case m.Greeting != nil:
				got = "greeting"
			case m.Return != nil:
				got = "return"
			case m.Error != nil:
				got = "error"
			case m.Event != "":
				got = "event"
			}
			if got != tt.want {
				t.Errorf("kind %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClientSkipsEventsAndReportsErrors(t *testing.T) {
	in := strings.Join([]string{
		`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 1, "major": 9}, "package": "v9.1.0"}, "capabilities": []}}`,
		`{"return": {}}`,
		``,
		`{"event": "X", "timestamp": {"seconds": 0, "microseconds": 0}}`,
		`{"return": {"qemu": {"micro": 0, "minor": 1, "major": 9}, "package": "v9.1.0"}}`,
		`{"error": {"class": "CommandNotFound", "desc": "The command query-sev-capabilities has not been found"}}`,
	}, "\n") + "\n"
	var sent bytes.Buffer
	c := NewClient(strings.NewReader(in), &sent)
	g, err := c.Handshake()
	if err != nil || g.Version.String() != "9.1.0" {
		t.Fatalf("handshake: %v %+v", err, g)
	}
	var v VersionInfo
	if err := c.Execute("query-version", nil, &v); err != nil || v.String() != "9.1.0" || v.Package != "v9.1.0" {
		t.Fatalf("query-version: %v %+v", err, v)
	}
	var qerr *QMPError
	if err := c.Execute("query-sev-capabilities", nil, nil); !errors.As(err, &qerr) || qerr.Class != "CommandNotFound" {
		t.Fatalf("err=%v, want CommandNotFound", err)
	}
	if err := c.Execute("quit", nil, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err=%v after EOF, want ErrUnexpectedEOF", err)
	}
	want := `{"execute":"qmp_capabilities"}` + "\n" + `{"execute":"query-version"}` + "\n" +
		`{"execute":"query-sev-capabilities"}` + "\n" + `{"execute":"quit"}` + "\n"
	if sent.String() != want {
		t.Errorf("sent %q, want %q", sent.String(), want)
	}
}

func TestClientRefusesHugeLine(t *testing.T) {
	in := `{"return": "` + strings.Repeat("a", maxQMPLine) + `"}` + "\n"
	c := NewClient(strings.NewReader(in), io.Discard)
	if err := c.Execute("x", nil, nil); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err=%v, want a length error", err)
	}
}

// FuzzQMPReply feeds arbitrary bytes to the parser and the client: neither
// may panic, and a parsed message is exactly one kind.
func FuzzQMPReply(f *testing.F) {
	f.Add([]byte(`{"return": {"enabled": false, "present": true}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := ParseMessage(b); err == nil {
			n := 0
			for _, ok := range []bool{m.Greeting != nil, m.Return != nil, m.Error != nil, m.Event != ""} {
				if ok {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("parsed %q into %d kinds", b, n)
			}
		}
		c := NewClient(bytes.NewReader(b), io.Discard)
		_, _ = c.Handshake()
		var v VersionInfo
		_ = c.Execute("query-version", nil, &v)
	})
}
