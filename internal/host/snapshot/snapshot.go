// Package snapshot writes berth snapshots: a .tar.gz holding exactly what
// discovery read on a host (file contents, directory listings, symlink
// targets, command outputs and live-probe values) so that
// `berth facts --root FILE.tar.gz` reproduces the host's facts on any
// machine. Registry credentials and private keys are redacted on the way
// in. hostfs.OpenSnapshot reads them back.
package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// ManifestPath is where a snapshot describes its content: its index,
// which offline roots read for the truncated and special files.
const ManifestPath = hostfs.SnapshotIndex

// KernelLogFile is where a snapshot keeps the kernel log read from
// /dev/kmsg; offline discovery reads it as the boot log.
const KernelLogFile = "dmesg"

// ManifestSchemaVersion is the version of Manifest.
const ManifestSchemaVersion = 1

// Manifest lists what a snapshot captured.
type Manifest struct {
	SchemaVersion int       `json:"schemaVersion"`
	CreatedAt     time.Time `json:"createdAt"`
	// Source is the root the snapshot was taken from ("/", "/host").
	Source       string `json:"source"`
	Live         bool   `json:"live"`
	BerthVersion string `json:"berthVersion,omitempty"`
	// Files are the regular files with content, in path order.
	Files []ManifestFile `json:"files"`
	// Placeholders are paths that were only listed or stat'ed, or device
	// nodes: stored as empty files.
	Placeholders []string `json:"placeholders,omitempty"`
	Symlinks     []string `json:"symlinks,omitempty"`
	// Listings are the directories whose listing is reproduced.
	Listings []string `json:"listings,omitempty"`
	Commands []string `json:"commands,omitempty"`
	Probes   []string `json:"probes,omitempty"`
	// KernelLog is set when dmesg holds the live kernel log.
	KernelLog bool `json:"kernelLog,omitempty"`
	// Redactions names the files whose secrets were replaced, with the
	// keys.
	Redactions []Redaction `json:"redactions,omitempty"`
	// Truncated lists every file stored cut short: discovery read more
	// of it than a snapshot keeps of one file (hostfs.DefaultMaxRecordedFile),
	// or the read failed for the file being over its cap (stored empty).
	// Reading one from the snapshot fails ("truncated in snapshot"), so
	// discovery reports the fact as unknown instead of parsing a part.
	Truncated []hostfs.TruncatedFile `json:"truncated,omitempty"`
	// Special lists the FIFOs, sockets and device nodes stored as empty
	// placeholders; reading one from the snapshot fails as on the host.
	Special []hostfs.SpecialFile `json:"special,omitempty"`
}

// ManifestFile is one captured file.
type ManifestFile struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

// Options configure Take and Write.
type Options struct {
	// Now is the clock; tests pass a fixed one.
	Now func() time.Time
	// BerthVersion is written into the manifest.
	BerthVersion string
	// Discover are the discovery options used by Take.
	Discover discover.Options
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

// Take runs discovery on root through a recording root and writes the
// snapshot of what it read to w. It returns the facts discovered (as
// `berth facts` would print them) and the manifest.
func Take(ctx context.Context, root hostfs.Root, w io.Writer, opt Options) (*facts.Facts, *Manifest, error) {
	rec := hostfs.NewRecorder(root)
	dopt := opt.Discover
	if dopt.Now == nil {
		dopt.Now = opt.Now
	}
	f := discover.Run(ctx, rec, dopt)
	m, err := Write(w, rec.Capture(), root.Path(), root.Live(), opt)
	if err != nil {
		return f, nil, err
	}
	return f, m, nil
}

// node is one archive entry being assembled.
type node struct {
	kind      hostfs.EntryKind
	mode      int64
	data      []byte
	target    string
	content   bool
	truncated bool
	size      int64
	special   string
}

// Write writes c as a snapshot archive to w.
func Write(w io.Writer, c hostfs.Capture, source string, live bool, opt Options) (*Manifest, error) {
	now := opt.now()
	m := &Manifest{
		SchemaVersion: ManifestSchemaVersion,
		CreatedAt:     now,
		Source:        source,
		Live:          live,
		BerthVersion:  opt.BerthVersion,
		Listings:      c.Listings,
		KernelLog:     c.KernelLog != nil,
	}
	nodes := map[string]*node{}
	addDirs := func(p string) {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := nodes[d]; !ok {
				nodes[d] = &node{kind: hostfs.KindDir, mode: 0o755}
			}
		}
	}
	for _, e := range c.Entries {
		if e.Path == ".berth" || strings.HasPrefix(e.Path, ".berth/") || (c.KernelLog != nil && e.Path == KernelLogFile) {
			continue
		}
		n := &node{kind: e.Kind, mode: int64(e.Mode.Perm())}
		switch e.Kind {
		case hostfs.KindDir:
			n.mode = 0o755
		case hostfs.KindSymlink:
			// Links that climbed above the host root (where ".." stopped
			// at the root) are stored as the absolute path they reached.
			n.target = hostfs.SnapshotLinkTarget(e.Path, e.Target)
		default:
			// Nothing in a snapshot is runnable: binaries are empty
			// placeholders and berth never executes from an offline root,
			// so their execute bits are dropped too.
			n.mode = (n.mode | 0o400) &^ 0o111
			if e.Read && !e.Special {
				data, keys := Redact(e.Path, e.Data)
				if len(keys) > 0 {
					m.Redactions = append(m.Redactions, Redaction{Path: e.Path, Keys: keys})
				}
				n.data, n.content = data, true
				n.truncated, n.size = e.Truncated, e.Size
			}
			if e.Special {
				n.special = e.SpecialKind
			}
		}
		addDirs(e.Path)
		nodes[e.Path] = n
	}
	if c.KernelLog != nil {
		nodes[KernelLogFile] = &node{kind: hostfs.KindFile, mode: 0o644, data: c.KernelLog, content: true}
	}
	rec, err := json.MarshalIndent(c.Recorded, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", hostfs.RecordedFile, err)
	}
	for _, cmd := range c.Recorded.Commands {
		m.Commands = append(m.Commands, strings.Join(cmd.Argv, " "))
	}
	for name := range c.Recorded.Probes {
		m.Probes = append(m.Probes, name)
	}
	sort.Strings(m.Probes)

	paths := make([]string, 0, len(nodes))
	for p := range nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := nodes[p]
		switch {
		case n.kind == hostfs.KindSymlink:
			m.Symlinks = append(m.Symlinks, p)
		case n.kind == hostfs.KindFile && n.content:
			m.Files = append(m.Files, ManifestFile{Path: p, Size: len(n.data)})
		case n.kind == hostfs.KindFile:
			m.Placeholders = append(m.Placeholders, p)
		}
		if n.kind == hostfs.KindFile && n.truncated {
			m.Truncated = append(m.Truncated, hostfs.TruncatedFile{Path: p, Kept: int64(len(n.data)), Size: n.size})
		}
		if n.kind == hostfs.KindFile && n.special != "" {
			m.Special = append(m.Special, hostfs.SpecialFile{Path: p, Kind: n.special})
		}
	}
	man, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", ManifestPath, err)
	}

	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	hdr := func(name string, typ byte, mode int64, size int, target string) error {
		return tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: int64(size), Linkname: target, ModTime: now, Format: tar.FormatPAX})
	}
	write := func(name string, data []byte, mode int64) error {
		if err := hdr(name, tar.TypeReg, mode, len(data), ""); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, p := range paths {
		n := nodes[p]
		var err error
		switch n.kind {
		case hostfs.KindDir:
			err = hdr(p+"/", tar.TypeDir, 0o755, 0, "")
		case hostfs.KindSymlink:
			err = hdr(p, tar.TypeSymlink, 0o777, 0, n.target)
		default:
			err = write(p, n.data, n.mode)
		}
		if err != nil {
			return nil, fmt.Errorf("writing snapshot entry %s: %w", p, err)
		}
	}
	if err := hdr(".berth/", tar.TypeDir, 0o755, 0, ""); err != nil {
		return nil, fmt.Errorf("writing snapshot: %w", err)
	}
	if err := write(hostfs.RecordedFile, append(rec, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing snapshot: %w", err)
	}
	if err := write(ManifestPath, append(man, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing snapshot: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("writing snapshot: %w", err)
	}
	return m, nil
}
