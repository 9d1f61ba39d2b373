package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Ref says where a manifest comes from: a local path, optionally pinned, or
// a URL, which must be pinned (URL@sha256:<hex>) because a manifest names
// every digest berth trusts.
type Ref struct {
	// Location is the path or URL without the pin.
	Location string
	// SHA256 is the pinned digest in lowercase hex, "" if not pinned.
	SHA256 string
	// Remote is true for an http or https URL.
	Remote bool
}

// String returns the reference in the form ParseRef reads.
func (r Ref) String() string {
	if r.SHA256 == "" {
		return r.Location
	}
	return r.Location + "@sha256:" + r.SHA256
}

// ParseRef parses "PATH", "PATH@sha256:<hex>" or "URL@sha256:<hex>".
func ParseRef(s string) (Ref, error) {
	if s == "" {
		return Ref{}, errors.New("empty manifest reference: expected a path, or URL@sha256:<hex>")
	}
	r := Ref{Location: s}
	if loc, pin, ok := cutLast(s, "@sha256:"); ok {
		b, err := hex.DecodeString(pin)
		if err != nil || len(b) != 32 {
			return Ref{}, fmt.Errorf("manifest reference %q: the pin %q is not a SHA-256 digest: expected @sha256:<64 hex digits>", s, pin)
		}
		r.Location, r.SHA256 = loc, strings.ToLower(pin)
	}
	if r.Location == "" {
		return Ref{}, fmt.Errorf("manifest reference %q: nothing before @sha256: expected a path or URL", s)
	}
	lower := strings.ToLower(r.Location)
	if strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://") {
		r.Remote = true
		if err := checkURL(r.Location); err != nil {
			return Ref{}, fmt.Errorf("manifest reference: %w", err)
		}
		if r.SHA256 == "" {
			return Ref{}, fmt.Errorf("manifest URL %s is not pinned: a manifest names every digest berth trusts, so give it as %s@sha256:<hex of the manifest file>", r.Location, r.Location)
		}
	} else if strings.Contains(r.Location, "://") {
		return Ref{}, fmt.Errorf("manifest reference %q: expected a local path or an http(s) URL", s)
	}
	return r, nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// LoadRef loads the manifest r names and checks its pin. URLs are not
// fetched yet: that arrives with berth install.
func LoadRef(r Ref) (*Manifest, error) {
	if r.Remote {
		return nil, fmt.Errorf("fetching manifests by URL arrives with berth install: download %s, then pass its local path (pinned as PATH@sha256:%s if you like)", r.Location, r.SHA256)
	}
	data, err := readFile(r.Location)
	if err != nil {
		return nil, err
	}
	if r.SHA256 != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != r.SHA256 {
			return nil, fmt.Errorf("manifest %s: sha256 is %s, but the reference pins %s", r.Location, got, r.SHA256)
		}
	}
	return Parse(data, r.Location)
}
