package manifest

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseNeverQuotesTheFile gives Parse files that are no manifest and
// hold a secret where decoders quote what they choke on: the error names
// the file (and line or field) and never carries the secret.
func TestParseNeverQuotesTheFile(t *testing.T) {
	const secret = "$y$j9T$SECRETHASH"
	for _, tc := range []struct{ name, doc, want string }{
		{"shadow", "root:" + secret + ":19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n", "top level: unknown field"},
		{"shadow as keys", "root:" + secret + ": x\n", "unknown field (a name that is not a field name"},
		{"duplicate key", "\"" + secret + "\": 1\n\"" + secret + "\": 2\n", "line 2"},
		{"syntax", "a: [" + secret + "\n", "not valid YAML or JSON"},
		{"value of a known field", "apiVersion: " + secret + "\n", "apiVersion: got (text not shown)"},
		{"JSON", `{"apiVersion": 1, "` + secret + `": 2}`, "unknown field"},
		{"nested", "apiVersion: " + APIVersion + "\nname: rel\nversion: \"1\"\ncomponents:\n- {name: shim, \"" + secret + ":x\": 1}\n", "components[0]: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "/etc/shadow")
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if strings.Contains(msg, "SECRETHASH") || strings.Contains(msg, "19000") {
				t.Errorf("the error quotes the file: %s", msg)
			}
			if !strings.Contains(msg, "/etc/shadow") || !strings.Contains(msg, tc.want) {
				t.Errorf("%s\nwant it to name the file and say %q", msg, tc.want)
			}
		})
	}
}

// TestLoadRefusesFIFO: a FIFO as --manifest is refused at once, by
// either loader.
func TestLoadRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "m.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, load := range map[string]func() error{
		"Load":    func() error { _, err := Load(fifo); return err },
		"LoadRef": func() error { _, err := LoadRef(Ref{Location: fifo}); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- load() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s(FIFO): %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked on a FIFO", name)
		}
	}
}
