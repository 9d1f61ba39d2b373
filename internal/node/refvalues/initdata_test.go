package refvalues

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitData checks the binding of real Kata init-data documents
// (testdata/initdata/SOURCES.md). Kata's Go runtime digests the TOML bytes
// as given, so for the TOML files the independent value is the stdlib
// digest of the file; for the annotation it is the digest Kata's own test
// asserts.
func TestInitData(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "initdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sha256Of := func(b []byte) string { d := sha256.Sum256(b); return hex.EncodeToString(d[:]) }
	sha384Of := func(b []byte) string { d := sha512.Sum384(b); return hex.EncodeToString(d[:]) }
	kataAsserted := "c6694bb7a29d6f37ec72a15582e004b9f3142159682db8509a304407419a49e5"
	tests := []struct {
		file, tee, form, algorithm, digest string
		hostData, mrConfigID               string
	}{
		{"kata-default-initdata.toml", "snp", "toml", "sha256", sha256Of(read("kata-default-initdata.toml")),
			sha256Of(read("kata-default-initdata.toml")), ""},
		{"kata-default-initdata.toml", "tdx", "toml", "sha256", sha256Of(read("kata-default-initdata.toml")),
			"", sha256Of(read("kata-default-initdata.toml")) + strings.Repeat("00", 16)},
		{"kata-oci-utils-test.annotation", "snp", "annotation", "sha256", kataAsserted, kataAsserted, ""},
		{"kata-oci-utils-test.annotation", "tdx", "annotation", "sha256", kataAsserted, "", kataAsserted + strings.Repeat("00", 16)},
		{"kata-types-sha384.toml", "snp", "toml", "sha384", sha384Of(read("kata-types-sha384.toml")),
			sha384Of(read("kata-types-sha384.toml"))[:64], ""},
		{"kata-types-sha384.toml", "tdx", "toml", "sha384", sha384Of(read("kata-types-sha384.toml")),
			"", sha384Of(read("kata-types-sha384.toml"))},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.tee, func(t *testing.T) {
			v, err := InitData(tc.file, read(tc.file), tc.tee)
			if err != nil {
				t.Fatal(err)
			}
			if v.Form != tc.form || v.Algorithm != tc.algorithm || v.Version != "0.1.0" || v.Digest != tc.digest {
				t.Errorf("got %+v, want form %s algorithm %s digest %s", v, tc.form, tc.algorithm, tc.digest)
			}
			if v.HostData != tc.hostData || v.MRConfigID != tc.mrConfigID {
				t.Errorf("HOST_DATA %q MRCONFIGID %q, want %q %q", v.HostData, v.MRConfigID, tc.hostData, tc.mrConfigID)
			}
		})
	}
}

func TestInitDataRefuses(t *testing.T) {
	tests := []struct{ name, in, tee, want string }{
		{"md5", "version = \"0.1.0\"\nalgorithm = \"md5\"\n[data]\n", "snp", `algorithm "md5"`},
		{"version", "version = \"0.2.0\"\nalgorithm = \"sha256\"\n[data]\n", "snp", `version "0.2.0"`},
		{"not a document", "hello", "snp", "neither an init-data TOML document"},
		{"data not strings", "version = \"0.1.0\"\nalgorithm = \"sha256\"\n[data]\nx = 1\n", "snp", "line 4"},
		{"no algorithm", "version = \"0.1.0\"\n", "tdx", "no version or algorithm"},
		{"tee", "version = \"0.1.0\"\nalgorithm = \"sha256\"\n", "sev", `TEE "sev"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := InitData("in.toml", []byte(tc.in), tc.tee)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestInitDataExports: RVPS registers the field of the document's TEE;
// Contrast has no field for it and says so.
func TestInitDataExports(t *testing.T) {
	iv := &InitDataValues{HostData: "aa", Digest: "aa"}
	d := &Document{TEE: "snp", SNP: &SNPValues{}, InitData: iv}
	_, rv, notes, err := d.RVPS()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rv["snp_host_data"].([]string); len(got) != 1 || got[0] != "aa" || rv["tdx_mr_config_id"] != nil {
		t.Errorf("rvps values %v", rv)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "snp_host_data") {
		t.Errorf("notes %q", notes)
	}
	d = &Document{TEE: "tdx", TDX: &TDXValues{}, InitData: &InitDataValues{MRConfigID: "bb"}}
	if _, rv, _, err = d.RVPS(); err != nil {
		t.Fatal(err)
	}
	if got, _ := rv["tdx_mr_config_id"].([]string); len(got) != 1 || got[0] != "bb" {
		t.Errorf("rvps values %v", rv)
	}
	if _, notes, err := d.Contrast(); err != nil || !strings.Contains(strings.Join(notes, "\n"), "init data") {
		t.Errorf("contrast notes %q, %v", notes, err)
	}
}

// The seeds live in testdata/fuzz/FuzzInitData: the real Kata documents.
func FuzzInitData(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, tee := range []string{"snp", "tdx"} {
			v, err := InitData("fuzz", b, tee)
			if err != nil {
				continue
			}
			if len(v.HostData)+len(v.MRConfigID) != map[string]int{"snp": 64, "tdx": 96}[tee] {
				t.Fatalf("%s binding %+v", tee, v)
			}
		}
	})
}
