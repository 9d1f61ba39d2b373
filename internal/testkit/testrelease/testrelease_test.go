package testrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServe fetches every component of the manifest by name and by
// digest, and the manifest by its pinned reference, and checks the bytes
// against the digests the manifest declares.
func TestServe(t *testing.T) {
	r := Serve(t, Options{Name: "rel", Version: "2.0.0", Shim: []byte("#!shim")})
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(r.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if len(r.Manifest.Components) < 5 {
		t.Fatalf("manifest has %d components", len(r.Manifest.Components))
	}
	for _, c := range r.Manifest.Components {
		for _, path := range []string{c.Name, "sha256/" + c.SHA256} {
			sum := sha256.Sum256(get(path))
			if hex.EncodeToString(sum[:]) != c.SHA256 {
				t.Errorf("%s: served bytes do not match the manifest's digest", path)
			}
		}
	}
	if got := r.Files["containerd-shim-kata-v2"]; string(got) != "#!shim" {
		t.Errorf("shim %q, want the given bytes", got)
	}
	loc, digest, _ := strings.Cut(r.Ref, "@sha256:")
	sum := sha256.Sum256(get(strings.TrimPrefix(loc, r.URL)))
	if hex.EncodeToString(sum[:]) != digest {
		t.Errorf("manifest at %s does not match its pinned digest", r.Ref)
	}
	if r.ByDigest.Load() != int64(len(r.Manifest.Components)) || r.Requests.Load() != 2*r.ByDigest.Load()+1 {
		t.Errorf("counted %d requests, %d by digest", r.Requests.Load(), r.ByDigest.Load())
	}
	other := Serve(t, Options{Name: "rel", Version: "2.1.0"})
	if other.Manifest.Components[1].SHA256 == r.Manifest.Components[1].SHA256 {
		t.Error("another version has the same bytes")
	}
}
