package discover

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// osReleaseFiles are tried in order (os-release(5)).
var osReleaseFiles = []string{"etc/os-release", "usr/lib/os-release"}

// maxOSRelease caps the read of os-release: a few hundred bytes on every
// distribution.
const maxOSRelease = 64 << 10

func runOSRelease(_ context.Context, s *session, f *facts.Facts) {
	kv, reason := s.osRelease()
	if kv == nil {
		s.unknownf("os", "%s", reason)
		return
	}
	f.OS = facts.OS{ID: kv["ID"], VersionID: kv["VERSION_ID"], PrettyName: kv["PRETTY_NAME"]}
	if f.OS.ID == "" {
		// os-release(5): ID defaults to "linux".
		f.OS.ID = "linux"
	}
}

// osRelease returns the host's os-release assignments, read and parsed
// once per run (the OS facts and the vendor of package versions use it),
// or nil and why not.
func (s *session) osRelease() (map[string]string, string) {
	s.osOnce.Do(func() {
		var reasons []string
		for _, p := range osReleaseFiles {
			b, err := hostfs.ReadFileLimit(s.root.FS(), p, maxOSRelease)
			if err != nil {
				reasons = append(reasons, ReadReason(p, err))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				break
			}
			kv, err := parseOSRelease(b)
			if err != nil {
				s.osReason = parseReason(p, err)
				return
			}
			s.osKV = kv
			return
		}
		s.osReason = strings.Join(reasons, "; ")
	})
	return s.osKV, s.osReason
}

// parseOSRelease parses the shell-like KEY=value assignments of
// os-release(5): values may be unquoted, or in single or double quotes
// with backslash escapes in double quotes. Comments and blank lines are
// skipped; anything else is an error naming the line.
func parseOSRelease(b []byte) (map[string]string, error) {
	kv := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimRight(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || !isShellName(k) {
			return nil, &lineError{line: n + 1, msg: "expected KEY=value"}
		}
		val, err := unquoteShell(v)
		if err != nil {
			return nil, &lineError{line: n + 1, msg: k + ": " + err.Error()}
		}
		kv[k] = val
	}
	return kv, nil
}

func isShellName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// unquoteShell undoes the quoting os-release allows.
func unquoteShell(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", errors.New("unterminated single quote")
		}
		return v[1 : len(v)-1], nil
	case '"':
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", errors.New("unterminated double quote")
		}
		var sb strings.Builder
		in := v[1 : len(v)-1]
		for i := 0; i < len(in); i++ {
			c := in[i]
			if c == '\\' && i+1 < len(in) {
				i++
				c = in[i]
			} else if c == '"' {
				return "", errors.New("unescaped double quote inside value")
			}
			sb.WriteByte(c)
		}
		return sb.String(), nil
	}
	if strings.ContainsAny(v, " \t\"'`$") {
		return "", errors.New("unquoted value with spaces or shell characters")
	}
	return v, nil
}
