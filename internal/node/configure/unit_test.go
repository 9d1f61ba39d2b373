package configure

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNydusUnitHostilePrefix renders berth's nydus-snapshotter unit with
// hostile --prefix values. Each accepted prefix must give a unit that
// the host's systemd (systemd-analyze verify, which loads the unit with
// systemd's own parser and checks that the executable it read exists)
// accepts, and that a parser of systemd.syntax(7) reads back as exactly
// the directives berth writes, with an ExecStart= of exactly berth's
// argv. A prefix systemd cannot carry is refused by name.
func TestNydusUnitHostilePrefix(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze (Debian package systemd) is needed to load the unit as systemd does: %v", err)
	}
	p := mustParse(t, "kubeadm-qemu-snp")
	base := t.TempDir()
	for _, tc := range []struct {
		name, prefix string
		refused      string // "" when accepted
	}{
		{"plain", "/opt/berth", ""},
		{"space", "/opt/my berth", ""},
		{"specifier", "/opt/berth%n", ""},
		{"percent-percent", "/opt/100%%", ""},
		{"semicolon word", "/opt/x ; /bin/sh", ""},
		{"glob and ampersand", "/opt/*&x", ""},
		{"unicode", "/opt/bérth", ""},
		{"equals and comma", "/opt/a=b,c", ""},
		{"newline directive", "/opt/berth\nExecStartPre=/bin/touch /pwned", "control character"},
		{"carriage return", "/opt/berth\r", "control character"},
		{"tab", "/opt/ber\tth", "control character"},
		{"escape", "/opt/\x1b[2Jberth", "control character"},
		{"invalid utf-8", "/opt/\xffberth", "UTF-8"},
		{"double quote", `/opt/be"rth`, "holds"},
		{"single quote", "/opt/be'rth", "holds"},
		{"backslash", `/opt/be\rth`, "holds"},
		{"dollar", "/opt/$HOME", "holds"},
		{"relative", "opt/berth", "absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := tc.prefix
			if path.IsAbs(prefix) {
				// Under the test's directory, where the executable can
				// exist for systemd-analyze to find.
				prefix = base + prefix
			}
			r, err := Render(p, targetFor(t, "kubeadm", 3), Options{Paths: Paths{Prefix: prefix}})
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), "--prefix") || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Render: %v, want a refusal naming --prefix (%s)", err, tc.refused)
				}
				if strings.ContainsAny(err.Error(), "\n\r\t\x1b") {
					t.Errorf("the error carries the control character raw: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := NydusNamesFor(Paths{Prefix: prefix})
			var unit []byte
			for _, f := range r.Host {
				if f.Path == n.UnitPath {
					unit = f.Content
				}
			}
			if unit == nil {
				t.Fatalf("no unit %s rendered", n.UnitPath)
			}
			keys, execStart := readUnit(t, unit)
			wantKeys := []string{"Unit.Description", "Unit.Before", "Service.Type", "Service.RuntimeDirectory",
				"Service.ExecStart", "Service.Restart", "Service.RestartSec", "Install.WantedBy"}
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("directives %q, want %q\n%s", keys, wantKeys, unit)
			}
			argv := systemdCommandLine(t, execStart)
			want := []string{n.Binary, "--config", n.Config, "--address", n.Socket, "--log-to-stdout"}
			if !slices.Equal(argv, want) {
				t.Errorf("ExecStart=%s\nreads as %q, want %q", execStart, argv, want)
			}

			// systemd's own parser: the unit loads, and the executable
			// it read is the one created here (with another path it
			// says "is not executable").
			bin := n.Binary
			if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), n.Unit)
			if err := os.WriteFile(file, unit, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", "--man=no", file).CombinedOutput()
			if err != nil || strings.Contains(string(out), n.Unit) {
				t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
			}
		})
	}
}

// readUnit reads a unit file by systemd.syntax(7): comments, sections,
// Key=Value with whitespace trimmed; it returns section.key in order and
// the value of ExecStart=. A line continuation fails the test: berth
// writes none.
func readUnit(t *testing.T, unit []byte) ([]string, string) {
	t.Helper()
	var keys []string
	var execStart, section string
	for l := range strings.SplitSeq(string(unit), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
			continue
		case strings.HasSuffix(l, `\`):
			t.Fatalf("line continuation: %q", l)
		case l[0] == '[' && l[len(l)-1] == ']':
			section = l[1 : len(l)-1]
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("line %q is not an assignment", l)
		}
		k = strings.TrimSpace(k)
		keys = append(keys, section+"."+k)
		if k == "ExecStart" {
			execStart = strings.TrimSpace(v)
		}
	}
	return keys, execStart
}

// systemdCommandLine splits one command line as systemd does
// (config_parse_exec): "%" specifiers first ("%%" is "%"; berth writes
// no other), then words by extract_first_word with unquoting and C
// escapes, then "$$" as "$" in the arguments (the executable is taken
// literally). A variable, an unknown specifier or a second command
// (an unquoted ";" word: a quoted one is an argument) fails the test.
func systemdCommandLine(t *testing.T, line string) []string {
	t.Helper()
	var spec strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] != '%' {
			spec.WriteByte(line[i])
			continue
		}
		if i+1 < len(line) && line[i+1] == '%' {
			spec.WriteByte('%')
			i++
			continue
		}
		t.Fatalf("specifier in %q at %d", line, i)
	}
	s := spec.String()
	var argv []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s == ";" || strings.HasPrefix(s, "; ") || strings.HasPrefix(s, ";\t") {
			t.Fatalf("a second command in %q", line)
		}
		var w strings.Builder
		var quote byte
	word:
		for len(s) > 0 {
			c := s[0]
			switch {
			case c == '\\':
				if len(s) < 2 {
					t.Fatalf("trailing backslash in %q", line)
				}
				switch e := s[1]; e {
				case '\\', '"', '\'', ' ':
					w.WriteByte(e)
				case 'n':
					w.WriteByte('\n')
				case 't':
					w.WriteByte('\t')
				default:
					t.Fatalf("escape \\%c in %q", e, line)
				}
				s = s[2:]
				continue
			case quote != 0 && c == quote:
				quote = 0
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
			case quote == 0 && (c == ' ' || c == '\t'):
				break word
			default:
				w.WriteByte(c)
			}
			s = s[1:]
		}
		if quote != 0 {
			t.Fatalf("unterminated quote in %q", line)
		}
		argv = append(argv, w.String())
	}
	for i, a := range argv {
		if i == 0 {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] == '$' {
				if j+1 < len(a) && a[j+1] == '$' {
					b.WriteByte('$')
					j++
					continue
				}
				t.Fatalf("variable in argument %d of %q", i, line)
			}
			b.WriteByte(a[j])
		}
		argv[i] = b.String()
	}
	return argv
}

// TestSystemdArg: each argument round-trips through the command line
// parser, plain ones unquoted.
func TestSystemdArg(t *testing.T) {
	for _, s := range []string{"--config", "/a b", `a"b`, "a'b", `a\b`, "$HOME", "${X}", "$$", "%n", "100%", ";", "", "é"} {
		q, err := systemdArg(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := systemdCommandLine(t, "/bin/x "+q); !slices.Equal(got, []string{"/bin/x", s}) {
			t.Errorf("systemdArg(%q) = %s reads back as %q", s, q, got)
		}
	}
	if q, _ := systemdArg("/opt/berth/etc/nydus/berth-nydus.toml"); q != "/opt/berth/etc/nydus/berth-nydus.toml" {
		t.Errorf("plain path quoted: %s", q)
	}
	if _, err := systemdArg("a\nb"); err == nil {
		t.Error("newline accepted")
	}
}
