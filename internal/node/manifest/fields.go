package manifest

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// ParseSHA256 accepts a SHA-256 digest as 64 hex digits, "sha256:<hex>" or
// SRI "sha256-<base64>" and returns it as lowercase hex.
func ParseSHA256(s string) (string, error) {
	const want = "expected 64 hex digits, sha256:<hex> or SRI sha256-<base64>"
	switch {
	case s == "":
		return "", errors.New("missing: " + want)
	case strings.HasPrefix(s, "sha256-"):
		b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(s, "sha256-"))
		if err != nil || len(b) != 32 {
			return "", fmt.Errorf("%q is not a SRI SHA-256 digest: %s", s, want)
		}
		return hex.EncodeToString(b), nil
	}
	h := strings.TrimPrefix(s, "sha256:")
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		return "", fmt.Errorf("%q is not a SHA-256 digest: %s", s, want)
	}
	return strings.ToLower(h), nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q: expected an http or https URL with a host", s)
	}
	return nil
}

// checkPath accepts a clean relative slash path that stays under the
// prefix: an install path must never escape it.
func checkPath(p string) error {
	if p == "" {
		return errors.New("missing: expected a path relative to the prefix, e.g. bin/qemu-system-x86_64")
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q: expected a clean relative path under the prefix (no leading /, no .., no //)", p)
	}
	return nil
}

// checkMember accepts an archive member name as tar writes it: relative,
// with an optional leading "./", and never climbing out.
func checkMember(n string) error {
	if n == "" {
		return errors.New("missing: expected the member's name in the archive, e.g. ./opt/kata/bin/qemu-system-x86_64")
	}
	if err := checkPath(strings.TrimPrefix(n, "./")); err != nil {
		return fmt.Errorf("%q: expected a relative member name without .. (a leading ./ is fine)", n)
	}
	return nil
}

func checkMode(m string) error {
	if m == "" {
		return errors.New(`missing: expected a quoted octal file mode, e.g. "0755"`)
	}
	_, err := parseMode(m)
	return err
}

// parseMode reads a quoted octal mode; only permission bits are allowed
// (no setuid, setgid or sticky: nothing berth installs needs them).
func parseMode(m string) (fs.FileMode, error) {
	if len(m) != 4 || m[0] != '0' {
		return 0, fmt.Errorf("%q: expected four octal digits with a leading 0, e.g. \"0755\"", m)
	}
	v, err := strconv.ParseUint(m, 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("%q: expected four octal digits with a leading 0, e.g. \"0755\"", m)
	}
	return fs.FileMode(v), nil
}
