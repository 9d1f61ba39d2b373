package refvalues

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/platform"
)

// A CoCo init-data document (Trustee kbs/docs/initdata.md) is TOML:
// version, algorithm and a [data] table of strings. The Kata runtime binds
// it to the TEE; berth computes the value a verifier must expect, as the
// Go runtime (containerd-shim-kata-v2) of kata-containers at
// 7c6ba40c54ea29b459b4997cff948caaba4e658b does:
//   - src/runtime/pkg/oci/utils.go addHypervisorInitdataOverrides: the
//     annotation io.katacontainers.config.hypervisor.cc_init_data is
//     base64 (standard) of gzip of the TOML; the digest is sha256, sha384
//     or sha512 (the document's algorithm) of the uncompressed TOML bytes,
//     exactly as sent, not of a re-serialization;
//   - src/runtime/pkg/govmm/qemu/qemu.go adjustProperLength: the digest
//     cut or zero-padded to the field, 32 bytes for SNP host-data
//     (HOST_DATA), 48 bytes for TDX mrconfigid (MRCONFIGID).
// runtime-rs (src/libs/kata-types/src/initdata.rs) pads the same way and
// refuses a version other than 0.1.0 or another algorithm; it digests its
// own re-serialization of the document, which berth does not model.

// InitDataValues are the TEE fields a Kata guest launched with an
// init-data document carries.
type InitDataValues struct {
	// Source is the file the document was read from.
	Source string `json:"source"`
	// Form is "toml" for the document itself, "annotation" for the
	// cc_init_data annotation value (base64 of gzip).
	Form      string `json:"form"`
	Version   string `json:"version"`
	Algorithm string `json:"algorithm"`
	// Digest is the whole digest of the TOML bytes, hex.
	Digest string `json:"digest"`
	// HostData is the expected SNP report HOST_DATA (32 bytes, hex).
	HostData string `json:"snpHostData,omitempty"`
	// MRConfigID is the expected TDX MRCONFIGID (48 bytes, hex).
	MRConfigID string `json:"tdxMrConfigId,omitempty"`
}

// initDataVersion is the only init-data version Kata's runtime-rs and
// Trustee accept.
const initDataVersion = "0.1.0"

// maxInitData bounds an init-data document once uncompressed: it carries
// a few configuration files and an agent policy.
const maxInitData = 4 << 20

// InitData computes the init-data binding of the document in b (TOML or
// the annotation value) for tee ("snp" or "tdx").
func InitData(name string, b []byte, tee string) (*InitDataValues, error) {
	v := &InitDataValues{Source: name, Form: "toml"}
	doc, tomlErr := parseInitData(b)
	if tomlErr != nil {
		raw, err := decodeInitDataAnnotation(b)
		if err != nil {
			return nil, fmt.Errorf("%s: neither an init-data TOML document (%w) nor a cc_init_data annotation value (%v)", name, tomlErr, err)
		}
		if doc, err = parseInitData(raw); err != nil {
			return nil, fmt.Errorf("%s: the annotation's document: %w", name, err)
		}
		b, v.Form = raw, "annotation"
	}
	var h hash.Hash
	switch doc.Algorithm {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("%s: algorithm %q: expected sha256, sha384 or sha512", name, doc.Algorithm)
	}
	if doc.Version != initDataVersion {
		return nil, fmt.Errorf("%s: version %q: expected %q (the only init-data version Kata and Trustee accept)", name, doc.Version, initDataVersion)
	}
	h.Write(b)
	d := h.Sum(nil)
	v.Version, v.Algorithm, v.Digest = doc.Version, doc.Algorithm, hex.EncodeToString(d)
	// Which launch field, and how long, is the TEE's property (platform's
	// table), not a switch here.
	t, _ := platform.ParseTEE(tee)
	field, size := t.InitDataField()
	if field == "" {
		return nil, fmt.Errorf("TEE %q binds no init data berth knows: expected snp or tdx", tee)
	}
	bound := hex.EncodeToString(fitDigest(d, size))
	if field == "HOST_DATA" {
		v.HostData = bound
	} else {
		v.MRConfigID = bound
	}
	return v, nil
}

type initDataDoc struct {
	Version   string            `toml:"version"`
	Algorithm string            `toml:"algorithm"`
	Data      map[string]string `toml:"data"`
}

// parseInitData decodes the document as the Go runtime does (into
// version, algorithm and a table of strings), naming line and column of
// a syntax or type error.
func parseInitData(b []byte) (*initDataDoc, error) {
	if len(b) > maxInitData {
		return nil, fmt.Errorf("%d bytes is more than the %d an init-data document may hold", len(b), maxInitData)
	}
	var doc initDataDoc
	if err := toml.Unmarshal(b, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("line %d column %d: %w", row, col, err)
		}
		return nil, err
	}
	if doc.Version == "" || doc.Algorithm == "" {
		return nil, fmt.Errorf("no version or algorithm key: not an init-data document")
	}
	return &doc, nil
}

// decodeInitDataAnnotation undoes base64 (standard, whitespace ignored as
// runtime-rs does) and gzip.
func decodeInitDataAnnotation(b []byte) ([]byte, error) {
	s := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, string(b))
	z, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxInitData+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if len(raw) > maxInitData {
		return nil, fmt.Errorf("gzip: more than %d bytes uncompressed", maxInitData)
	}
	return raw, nil
}

// fitDigest cuts d to n bytes or pads it with zeros (Kata's
// adjustProperLength).
func fitDigest(d []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, d)
	return out
}

// writeTable prints the binding under the values (nothing without one).
func (v *InitDataValues) writeTable(b *bytes.Buffer) {
	if v == nil {
		return
	}
	fmt.Fprintf(b, "\nInit data: %s (%s, version %s, %s)\n", v.Source, v.Form, v.Version, v.Algorithm)
	fmt.Fprintf(b, "Digest:    %s\n", v.Digest)
	if v.HostData != "" {
		fmt.Fprintf(b, "HOST_DATA  %s\n", v.HostData)
	}
	if v.MRConfigID != "" {
		fmt.Fprintf(b, "MRCONFIGID %s\n", v.MRConfigID)
	}
}

// rvps registers the binding under the names of the report fields
// (Trustee's default policy does not query them: Trustee checks init data
// itself when the guest presents the document; a custom policy can).
func (v *InitDataValues) rvps(rv map[string]any, notes []string) []string {
	if v == nil {
		return notes
	}
	if v.HostData != "" {
		rv["snp_host_data"] = []string{v.HostData}
	}
	if v.MRConfigID != "" {
		rv["tdx_mr_config_id"] = []string{v.MRConfigID}
	}
	return append(notes, "snp_host_data / tdx_mr_config_id: registered for a custom policy; Trustee's default policy does not query them (it binds init data itself when the guest sends init_data_toml)")
}

func (v *InitDataValues) contrastNote() string {
	return "init data: Contrast binds and checks HOST_DATA / MRCONFIGID from its own manifest; its ReferenceValues have no field for them; left out"
}
