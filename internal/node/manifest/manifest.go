// Package manifest reads berth's component manifest: the versioned list of
// files (hypervisors, shims, guest kernels, images, firmware) a platform
// release is made of, where to download each from, its SHA-256 and size, the
// platforms it serves and where it is installed. The installer resolves a
// manifest for one platform to install only what that platform needs, and
// berth refvalues resolves it to find the measured boot components.
//
// The format is documented in FORMAT.md next to this file; its JSON Schema is
// manifest.schema.json, kept in step with the Go types by a test, and
// examples/manifest-kata.yaml is a complete example.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/decodeerr"
	"berth.dev/berth/internal/host/hostfs"
)

// APIVersion is the apiVersion a manifest must declare. It changes only when
// a field changes meaning or disappears.
const APIVersion = "berth.dev/manifest/v1"

// MaxSize bounds a manifest file: a real one is a few kilobytes, and the
// parser must not be made to hold an arbitrary amount of untrusted input.
const MaxSize = 4 << 20

// MaxComponentSize bounds a component's declared size when parsing: 1 TiB,
// far above any real file, so that sizes (and their sums over a 4 MiB
// manifest) stay meaningful. The operator's own, much lower limit is
// applied before anything is downloaded (berth install and bundle
// --max-component-size).
const MaxComponentSize = 1 << 40

// Manifest is a parsed, validated component manifest.
type Manifest struct {
	// APIVersion is "berth.dev/manifest/v1" (the APIVersion constant).
	APIVersion string `json:"apiVersion"`
	// Name names the release the manifest describes, e.g. "kata-static".
	Name string `json:"name"`
	// Version is the release's version, e.g. "3.24.0".
	Version string `json:"version"`
	// Components are the files of the release.
	Components []Component `json:"components"`
	// Measured gives the measured kernel command line of confidential
	// platforms.
	Measured []Measured `json:"measured,omitempty"`

	source string
	digest string
}

// Component is one downloadable file: either a plain file installed at Path,
// or an archive from which Archive.Members are extracted.
type Component struct {
	// Name identifies the component; unique within the manifest.
	Name string `json:"name"`
	// Version is the component's own version (e.g. QEMU's).
	Version string `json:"version"`
	// Role says what the component is to the platform; firmware, kernel and
	// initrd are the measured boot components of confidential platforms.
	Role Role `json:"role,omitempty"`
	// Sources are download URLs (http or https), tried in order.
	Sources []string `json:"sources"`
	// SHA256 is the digest of the downloaded file, lowercase hex. The
	// manifest may also give it as SRI ("sha256-<base64>") or
	// "sha256:<hex>"; parsing normalises it.
	SHA256 string `json:"sha256"`
	// Size is the size of the downloaded file in bytes.
	Size int64 `json:"size"`
	// Serves selects the platforms that need the component; empty means
	// every platform.
	Serves Selector `json:"serves,omitzero"`
	// Path is the install path of a plain file, relative to the prefix.
	Path string `json:"path,omitempty"`
	// Mode is the octal file mode of a plain file, e.g. "0755".
	Mode string `json:"mode,omitempty"`
	// Archive, when set, makes the download an archive to extract from.
	Archive *Archive `json:"archive,omitempty"`
}

// Archive describes an archive component.
type Archive struct {
	// Type is tar, tar.gz or tar.zst.
	Type string `json:"type"`
	// Members are the files to extract; others are ignored.
	Members []Member `json:"members"`
}

// Member is one file extracted from an archive.
type Member struct {
	// Name is the member's name inside the archive.
	Name string `json:"name"`
	// Path is where it is installed, relative to the prefix.
	Path string `json:"path"`
	// Mode is its octal file mode, e.g. "0755".
	Mode string `json:"mode"`
}

// Measured gives the kernel command line that confidential platforms
// selected by Serves boot with; it is part of the SNP launch measurement.
type Measured struct {
	// Serves selects the platforms this entry applies to.
	Serves Selector `json:"serves,omitzero"`
	// KernelCmdline is the measured kernel command line (may be empty, but
	// must be given).
	KernelCmdline string `json:"kernelCmdline"`
}

// Role is what a component is to the platform.
type Role string

// The roles. Firmware, kernel and initrd are measured by confidential
// platforms; an image is a guest root disk, verified in the guest, not
// measured at launch.
const (
	RoleFirmware    Role = "firmware"
	RoleKernel      Role = "kernel"
	RoleInitrd      Role = "initrd"
	RoleImage       Role = "image"
	RoleHypervisor  Role = "hypervisor"
	RoleShim        Role = "shim"
	RoleRuntime     Role = "runtime"
	RoleVirtiofsd   Role = "virtiofsd"
	RoleSnapshotter Role = "snapshotter"
	RoleConfig      Role = "config"
	RoleTool        Role = "tool"
	RoleData        Role = "data"
)

// Roles returns every role in documentation order.
func Roles() []Role {
	return []Role{RoleFirmware, RoleKernel, RoleInitrd, RoleImage, RoleHypervisor, RoleShim, RoleRuntime,
		RoleVirtiofsd, RoleSnapshotter, RoleConfig, RoleTool, RoleData}
}

// Measured reports whether the role is part of a confidential guest's launch
// measurement, so that its file digest (not an archive's) must be known.
func (r Role) Measured() bool { return r == RoleFirmware || r == RoleKernel || r == RoleInitrd }

// ArchiveTypes are the accepted Archive.Type values.
func ArchiveTypes() []string { return []string{"tar", "tar.gz", "tar.zst"} }

// Source is the file or name the manifest was read from.
func (m *Manifest) Source() string { return m.source }

// Digest is "sha256:<hex>" of the manifest bytes as read, the value a
// pinned reference (URL@sha256:<hex>) names.
func (m *Manifest) Digest() string { return m.digest }

// Load reads and parses the manifest file at path.
func Load(path string) (*Manifest, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// readFile reads a manifest file: a regular file only (a FIFO or device
// is refused unopened, hostfs.OpenRegular), and no more than MaxSize
// bytes and one, which Parse refuses by name.
func readFile(path string) ([]byte, error) {
	f, err := hostfs.OpenRegular(path, 0)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", path, err)
	}
	return data, nil
}

// Parse parses and validates a manifest in YAML or JSON (JSON is YAML);
// name is used in error messages, which name the field path
// (components[3].sha256) and what was expected.
func Parse(data []byte, name string) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: manifest larger than %d bytes", name, MaxSize)
	}
	m, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	m.source, m.digest = name, "sha256:"+hex.EncodeToString(sum[:])
	return m, nil
}

// wireManifest decodes the top level, keeping list items raw so that each is
// decoded on its own and its errors carry its index.
type wireManifest struct {
	APIVersion string            `json:"apiVersion"`
	Name       string            `json:"name"`
	Version    string            `json:"version"`
	Components []json.RawMessage `json:"components"`
	Measured   []json.RawMessage `json:"measured"`
}

// wireComponent shadows Serves so that the selector is parsed by hand, with
// errors naming the dimension.
type wireComponent struct {
	Component
	Serves json.RawMessage `json:"serves"`
}

type wireMeasured struct {
	Serves        json.RawMessage `json:"serves"`
	KernelCmdline *string         `json:"kernelCmdline"`
}

func parse(data []byte) (*Manifest, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty manifest: expected a YAML or JSON document with apiVersion " + APIVersion)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// The decoder's text, not its error: it quotes the document,
		// which may be any file the user named (decodeerr).
		return nil, fmt.Errorf("not valid YAML or JSON: %s", decodeerr.Error(err))
	}
	var w wireManifest
	if err := decode(js, &w, ""); err != nil {
		return nil, err
	}
	if w.APIVersion != APIVersion {
		return nil, fmt.Errorf("apiVersion: got %s, expected %q", decodeerr.Value(w.APIVersion), APIVersion)
	}
	if strings.TrimSpace(w.Name) == "" {
		return nil, errors.New("name: missing: expected the release name, e.g. kata-static")
	}
	if strings.TrimSpace(w.Version) == "" {
		return nil, errors.New("version: missing: expected the release version, e.g. 3.24.0")
	}
	if len(w.Components) == 0 {
		return nil, errors.New("components: missing or empty: expected a list of components")
	}
	m := &Manifest{APIVersion: w.APIVersion, Name: w.Name, Version: w.Version}
	names := map[string]int{}
	for i, raw := range w.Components {
		at := fmt.Sprintf("components[%d]", i)
		var wc wireComponent
		if err := decode(raw, &wc, at); err != nil {
			return nil, err
		}
		c := wc.Component
		if c.Serves, err = parseSelector(wc.Serves, at+".serves"); err != nil {
			return nil, err
		}
		if err := c.normalize(at); err != nil {
			return nil, err
		}
		if j, dup := names[c.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is already the name of components[%d]: expected unique names", at, c.Name, j)
		}
		names[c.Name] = i
		m.Components = append(m.Components, c)
	}
	for i, raw := range w.Measured {
		at := fmt.Sprintf("measured[%d]", i)
		var wm wireMeasured
		if err := decode(raw, &wm, at); err != nil {
			return nil, err
		}
		sel, err := parseSelector(wm.Serves, at+".serves")
		if err != nil {
			return nil, err
		}
		if wm.KernelCmdline == nil {
			return nil, fmt.Errorf("%s.kernelCmdline: missing: expected the measured kernel command line (\"\" if none)", at)
		}
		m.Measured = append(m.Measured, Measured{Serves: sel, KernelCmdline: *wm.KernelCmdline})
	}
	return m, nil
}

// decode unmarshals one JSON value strictly and turns encoding/json's errors
// into field paths under at.
func decode(js []byte, v any, at string) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// The embedded Component of wireComponent shows up in the path.
		field := join(at, strings.TrimPrefix(te.Field, "Component."))
		if field == "" {
			return fmt.Errorf("expected a mapping with apiVersion, name, version and components, got %s", te.Value)
		}
		return fmt.Errorf("%s: expected %s, got %s", field, jsonType(te.Type.Kind().String()), te.Value)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		where := at
		if where == "" {
			where = "top level"
		}
		name, _ := strconv.Unquote(msg)
		return fmt.Errorf("%s: unknown field %s", where, decodeerr.Field(name))
	}
	if at == "" {
		return fmt.Errorf("expected a mapping with apiVersion, name, version and components: %s", decodeerr.Error(err))
	}
	return fmt.Errorf("%s: %s", at, decodeerr.Error(err))
}

func join(at, field string) string {
	switch {
	case at == "":
		return field
	case field == "":
		return at
	}
	return at + "." + field
}

// jsonType names a Go kind the way a manifest author thinks of it.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int64", "int", "uint32":
		return "an integer"
	case "slice":
		return "a list"
	case "struct", "map", "ptr":
		return "a mapping"
	case "bool":
		return "true or false"
	}
	return kind
}

// normalize validates a decoded component and brings its digest into
// canonical form.
func (c *Component) normalize(at string) error {
	if !validName(c.Name) {
		return fmt.Errorf("%s.name: %q: expected lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", at, c.Name)
	}
	if strings.TrimSpace(c.Version) == "" {
		return fmt.Errorf("%s.version: missing: expected the component's version", at)
	}
	if c.Role != "" && !knownRole(c.Role) {
		return fmt.Errorf("%s.role: %q: expected one of %s", at, c.Role, roleList())
	}
	if len(c.Sources) == 0 {
		return fmt.Errorf("%s.sources: missing: expected at least one http or https URL", at)
	}
	for j, s := range c.Sources {
		if err := checkURL(s); err != nil {
			return fmt.Errorf("%s.sources[%d]: %w", at, j, err)
		}
	}
	hexsum, err := ParseSHA256(c.SHA256)
	if err != nil {
		return fmt.Errorf("%s.sha256: %w", at, err)
	}
	c.SHA256 = hexsum
	if c.Size <= 0 || c.Size > MaxComponentSize {
		return fmt.Errorf("%s.size: %d: expected the download's size in bytes (> 0, at most 1 TiB)", at, c.Size)
	}
	if c.Archive == nil {
		if c.Path == "" {
			return fmt.Errorf("%s.path: missing: expected the install path relative to the prefix (or an archive block)", at)
		}
		if err := checkPath(c.Path); err != nil {
			return fmt.Errorf("%s.path: %w", at, err)
		}
		if err := checkMode(c.Mode); err != nil {
			return fmt.Errorf("%s.mode: %w", at, err)
		}
		return nil
	}
	if c.Path != "" || c.Mode != "" {
		return fmt.Errorf("%s: path and mode belong to archive.members when archive is set", at)
	}
	if c.Role.Measured() {
		return fmt.Errorf("%s.archive: a %s must be a plain file: its own sha256 is what refvalues verifies", at, c.Role)
	}
	a := c.Archive
	if !knownArchive(a.Type) {
		return fmt.Errorf("%s.archive.type: %q: expected one of %s", at, a.Type, strings.Join(ArchiveTypes(), ", "))
	}
	if len(a.Members) == 0 {
		return fmt.Errorf("%s.archive.members: missing: expected the members to extract", at)
	}
	for j, mb := range a.Members {
		mat := fmt.Sprintf("%s.archive.members[%d]", at, j)
		if err := checkMember(mb.Name); err != nil {
			return fmt.Errorf("%s.name: %w", mat, err)
		}
		if err := checkPath(mb.Path); err != nil {
			return fmt.Errorf("%s.path: %w", mat, err)
		}
		if err := checkMode(mb.Mode); err != nil {
			return fmt.Errorf("%s.mode: %w", mat, err)
		}
	}
	return nil
}

// InstallPaths are the paths, relative to the prefix, that the component
// installs.
func (c Component) InstallPaths() []string {
	if c.Archive == nil {
		return []string{c.Path}
	}
	ps := make([]string, len(c.Archive.Members))
	for i, mb := range c.Archive.Members {
		ps[i] = mb.Path
	}
	return ps
}

// FileMode returns Mode as a file mode (0 if Mode is empty, which only an
// archive component has).
func FileMode(mode string) fs.FileMode {
	v, err := parseMode(mode)
	if err != nil {
		return 0
	}
	return v
}

func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '.' || r == '_' || r == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func knownRole(r Role) bool {
	for _, k := range Roles() {
		if r == k {
			return true
		}
	}
	return false
}

func roleList() string {
	s := make([]string, 0, len(Roles()))
	for _, r := range Roles() {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

func knownArchive(t string) bool {
	for _, k := range ArchiveTypes() {
		if t == k {
			return true
		}
	}
	return false
}
