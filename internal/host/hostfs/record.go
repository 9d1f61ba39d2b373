package hostfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// DefaultMaxRecordedFile caps how much of one file a Recorder keeps: a
// file cut there is listed in the snapshot's index as truncated.
const DefaultMaxRecordedFile = 8 << 20

// EntryKind is the kind of a path captured by a Recorder.
type EntryKind string

// The kinds of captured entries. Device nodes, sockets and FIFOs are
// captured as KindFile with Special set: a snapshot stores them as empty
// regular files (the fixture convention).
const (
	KindFile    EntryKind = "file"
	KindDir     EntryKind = "dir"
	KindSymlink EntryKind = "symlink"
)

// Entry is one path that discovery touched, with symlinks in its parent
// directories resolved (so that the entry can be recreated under them).
type Entry struct {
	Path string
	Kind EntryKind
	// Mode holds the permission bits.
	Mode fs.FileMode
	// Data is the content discovery read; Read says whether it read it
	// (otherwise the file was only listed or stat'ed and is stored empty).
	Data []byte
	Read bool
	// Target is a symlink's target as the host has it.
	Target string
	// Special is set for device nodes, sockets and FIFOs; SpecialKind
	// says which ("FIFO", "socket", "character device", "block device").
	Special     bool
	SpecialKind string
	// Truncated is set when discovery read more of the file than Data
	// holds (the recorder's cap), or when the read failed for being over
	// the cap of the read (Data is then empty). Size is the size of the
	// file on the host when known.
	Truncated bool
	Size      int64
}

// Capture is everything a Recorder saw: the entries, the directories that
// were listed, and the command outputs and probe values for
// .berth/recorded.json.
type Capture struct {
	Entries  []Entry
	Listings []string
	Recorded Recorded
	// KernelLog is what was read from the live kernel ring buffer, nil
	// when it was not read.
	KernelLog []byte
}

// Recorder wraps a Root and logs every read made through it — file
// contents, directory listings, symlink targets, stat results, command
// outputs, probe values and the kernel log — so that a snapshot can hold
// exactly what discovery looked at and nothing else.
type Recorder struct {
	inner Root
	fsys  *recordingFS
	// MaxFile caps how much of one file is kept (default
	// DefaultMaxRecordedFile); set it before discovery runs.
	MaxFile int

	mu        sync.Mutex
	entries   map[string]*Entry
	listings  map[string]bool
	commands  []CommandResult
	probes    map[string]json.RawMessage
	kernelLog []byte
}

// NewRecorder returns a recording wrapper around inner.
func NewRecorder(inner Root) *Recorder {
	r := &Recorder{
		inner:    inner,
		MaxFile:  DefaultMaxRecordedFile,
		entries:  map[string]*Entry{},
		listings: map[string]bool{},
		probes:   map[string]json.RawMessage{},
	}
	r.fsys = &recordingFS{r: r, in: inner.FS()}
	return r
}

// FS implements Root.
func (r *Recorder) FS() FS { return r.fsys }

// Live implements Root.
func (r *Recorder) Live() bool { return r.inner.Live() }

// Path implements Root.
func (r *Recorder) Path() string { return r.inner.Path() }

// Run implements Root and records the result. Requests the inner root
// could not answer offline are not recorded.
func (r *Recorder) Run(ctx context.Context, argv ...string) (CommandResult, error) {
	res, err := r.inner.Run(ctx, argv...)
	if errors.Is(err, ErrOffline) {
		return res, err
	}
	rec := res
	rec.Argv = append([]string(nil), argv...)
	rec.Recorded = false
	capOutputs(&rec)
	r.mu.Lock()
	r.commands = append(r.commands, rec)
	r.mu.Unlock()
	return res, err
}

// Probe implements Root; a value found in the inner root's recordings is
// recorded again.
func (r *Recorder) Probe(name string, v any) error {
	if err := r.inner.Probe(name, v); err != nil {
		return err
	}
	r.RecordProbe(name, v)
	return nil
}

// RecordProbe stores the value a live probe produced under name.
func (r *Recorder) RecordProbe(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil || len(b) > maxProbe {
		return
	}
	r.mu.Lock()
	r.probes[name] = b
	r.mu.Unlock()
}

// KernelLog implements KernelLogReader when the inner root does.
func (r *Recorder) KernelLog() ([]byte, error) {
	kl, ok := r.inner.(KernelLogReader)
	if !ok || !r.inner.Live() {
		return nil, ErrOffline
	}
	b, err := kl.KernelLog()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.kernelLog = append([]byte(nil), b...)
	r.mu.Unlock()
	return b, nil
}

// OpenRaw implements RawReader when the inner root is live and does: the
// read is deliberately not recorded (a snapshot must not carry binaries);
// the caller records what it learnt with RecordProbe.
func (r *Recorder) OpenRaw(name string) (*os.File, error) {
	rr, ok := r.inner.(RawReader)
	if !ok || !r.inner.Live() {
		return nil, ErrOffline
	}
	return rr.OpenRaw(name)
}

// RecordProbe stores v as the recorded value of probe name when root
// records (a snapshot is being taken); otherwise it does nothing. Live
// probes call it after probing so that snapshots carry their results.
func RecordProbe(root Root, name string, v any) {
	if pr, ok := root.(interface{ RecordProbe(string, any) }); ok {
		pr.RecordProbe(name, v)
	}
}

// Capture returns what was recorded so far, entries sorted by path.
func (r *Recorder) Capture() Capture {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Capture{Recorded: Recorded{SchemaVersion: RecordedSchemaVersion}}
	for _, e := range r.entries {
		c.Entries = append(c.Entries, *e)
	}
	sort.Slice(c.Entries, func(i, j int) bool { return c.Entries[i].Path < c.Entries[j].Path })
	for d := range r.listings {
		c.Listings = append(c.Listings, d)
	}
	sort.Strings(c.Listings)
	c.Recorded.Commands = append([]CommandResult(nil), r.commands...)
	if len(r.probes) > 0 {
		c.Recorded.Probes = make(map[string]json.RawMessage, len(r.probes))
		for k, v := range r.probes {
			c.Recorded.Probes[k] = v
		}
	}
	if r.kernelLog != nil {
		c.KernelLog = append([]byte(nil), r.kernelLog...)
	}
	return c
}

// note merges what was learnt about one path; content read wins over a
// placeholder.
func (r *Recorder) note(e Entry) {
	if e.Path == "." || e.Path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.entries[e.Path]
	if !ok {
		r.entries[e.Path] = &e
		return
	}
	if e.Read && (!old.Read || (old.Truncated && !e.Truncated) || len(e.Data) > len(old.Data)) {
		old.Data, old.Read, old.Truncated, old.Size = e.Data, true, e.Truncated, e.Size
	}
	if old.Kind != e.Kind && e.Kind != "" {
		old.Kind, old.Target = e.Kind, e.Target
	}
	if old.Mode == 0 {
		old.Mode = e.Mode
	}
	if e.Special {
		old.Special, old.SpecialKind = true, e.SpecialKind
	}
}

// entryFor describes an fs.FileInfo as an entry at p.
func entryFor(p string, mode fs.FileMode) Entry {
	e := Entry{Path: p, Mode: mode.Perm()}
	switch {
	case mode.IsDir():
		e.Kind = KindDir
	case mode&fs.ModeSymlink != 0:
		e.Kind = KindSymlink
	default:
		e.Kind = KindFile
		if !mode.IsRegular() {
			e.Special, e.SpecialKind = true, kindOf(fileFormat(mode))
		}
	}
	return e
}

// recordingFS is the FS of a Recorder.
type recordingFS struct {
	r  *Recorder
	in FS
}

// resolve follows the symlinks in every component of p (the last one too
// when final is set) the way the root does, as in a chroot (an absolute
// target restarts at the root, ".." stops there), records each link met,
// and returns the path with the links resolved. On a loop or an error it
// gives up and returns what it has: recording is best effort and must
// never change what discovery sees.
func (f *recordingFS) resolve(p string, final bool) string {
	if p == "." {
		return p
	}
	var cur []string
	todo := strings.Split(p, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
			continue
		}
		next := strings.Join(append(cur[:len(cur):len(cur)], c), "/")
		if !final && len(todo) == 0 {
			cur = append(cur, c)
			break
		}
		fi, err := f.in.Lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = append(cur, c)
			continue
		}
		target, err := f.in.ReadLink(next)
		if err != nil || hops >= maxLinks {
			cur = append(cur, c)
			continue
		}
		hops++
		f.r.note(Entry{Path: next, Kind: KindSymlink, Target: target, Mode: fi.Mode().Perm()})
		if path.IsAbs(target) {
			cur = cur[:0]
		}
		// Re-walk the destination so links inside it are seen too.
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(cur) == 0 {
		return "."
	}
	return strings.Join(cur, "/")
}

func (f *recordingFS) Open(name string) (fs.File, error) {
	file, err := f.in.Open(name)
	if err != nil {
		f.noteFailedRead(name, err)
		return nil, err
	}
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			f.r.note(entryFor(f.resolve(name, true), fi.Mode()))
		}
		return file, nil
	}
	return &teeFile{File: file, max: f.r.MaxFile, done: func(b []byte, truncated bool) {
		e := entryFor(f.resolve(name, true), fi.Mode())
		e.Data, e.Read = b, true
		if truncated {
			e.Truncated, e.Size = true, fi.Size()
		}
		f.r.note(e)
	}}, nil
}

// noteFailedRead records what a failed read says about the host, so that
// the snapshot reads the same way: a FIFO, socket or device is stored as a
// special placeholder, a file over the cap of the read as truncated, a
// directory as a directory, a loop of links as those links. Other
// failures (missing, permission denied) leave nothing.
func (f *recordingFS) noteFailedRead(name string, err error) {
	var nr *NotRegularError
	switch {
	case errors.As(err, &nr) && nr.Kind != "symlink":
		e := Entry{Path: f.resolve(name, true), Kind: KindFile, Mode: 0o644, Special: true, SpecialKind: nr.Kind}
		if fi, err := f.in.Stat(name); err == nil {
			e.Mode = fi.Mode().Perm()
		}
		f.r.note(e)
	case errors.Is(err, ErrTooLarge):
		e := Entry{Path: f.resolve(name, true), Kind: KindFile, Mode: 0o644, Read: true, Truncated: true}
		if fi, err := f.in.Stat(name); err == nil && fi.Mode().IsRegular() {
			e.Mode, e.Size = fi.Mode().Perm(), fi.Size()
		}
		f.r.note(e)
	case errors.Is(err, syscall.EISDIR):
		f.r.note(Entry{Path: f.resolve(name, true), Kind: KindDir, Mode: 0o755})
	case errors.Is(err, syscall.ELOOP):
		// Walking the path records the links of the loop.
		f.resolve(name, true)
	}
}

func (f *recordingFS) ReadFile(name string) ([]byte, error) {
	return f.readFile(name, func() ([]byte, error) { return f.in.ReadFile(name) })
}

// ReadFileLimit reads with the source's cap (see the package function) and
// records the read.
func (f *recordingFS) ReadFileLimit(name string, limit int64) ([]byte, error) {
	return f.readFile(name, func() ([]byte, error) { return ReadFileLimit(f.in, name, limit) })
}

func (f *recordingFS) readFile(name string, read func() ([]byte, error)) ([]byte, error) {
	b, err := read()
	if err != nil {
		f.noteFailedRead(name, err)
		return b, err
	}
	mode := fs.FileMode(0o444)
	if fi, err := f.in.Stat(name); err == nil {
		mode = fi.Mode()
	}
	e := entryFor(f.resolve(name, true), mode)
	if e.Kind == KindFile {
		e.Data = b
		if len(e.Data) > f.r.MaxFile {
			e.Data = e.Data[:f.r.MaxFile]
			e.Truncated, e.Size = true, int64(len(b))
		}
		e.Read = true
	}
	f.r.note(e)
	return b, nil
}

func (f *recordingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := f.in.ReadDir(name)
	if err != nil {
		return ents, err
	}
	dir := f.resolve(name, true)
	f.r.note(Entry{Path: dir, Kind: KindDir, Mode: 0o755})
	f.r.mu.Lock()
	f.r.listings[dir] = true
	f.r.mu.Unlock()
	for _, de := range ents {
		child := path.Join(dir, de.Name())
		mode := de.Type() | 0o644
		if de.IsDir() {
			mode = de.Type() | 0o755
		}
		e := entryFor(child, mode)
		if e.Kind == KindSymlink {
			t, err := f.in.ReadLink(path.Join(name, de.Name()))
			if err != nil {
				continue
			}
			e.Target = t
		}
		f.r.note(e)
	}
	return ents, nil
}

func (f *recordingFS) ReadLink(name string) (string, error) {
	t, err := f.in.ReadLink(name)
	if err != nil {
		return t, err
	}
	f.r.note(Entry{Path: f.resolve(name, false), Kind: KindSymlink, Target: t, Mode: 0o777})
	return t, nil
}

func (f *recordingFS) Lstat(name string) (fs.FileInfo, error) {
	fi, err := f.in.Lstat(name)
	if err != nil {
		return fi, err
	}
	e := entryFor(f.resolve(name, false), fi.Mode())
	if e.Kind == KindSymlink {
		t, err := f.in.ReadLink(name)
		if err != nil {
			return fi, nil
		}
		e.Target = t
	}
	f.r.note(e)
	return fi, nil
}

func (f *recordingFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := f.in.Stat(name)
	if err != nil {
		return fi, err
	}
	f.r.note(entryFor(f.resolve(name, true), fi.Mode()))
	return fi, nil
}

// teeFile keeps what was read from a file, up to max bytes, and hands it
// over on Close, saying whether it had to drop some.
type teeFile struct {
	fs.File
	buf       bytes.Buffer
	max       int
	truncated bool
	done      func([]byte, bool)
	once      sync.Once
}

func (t *teeFile) Read(p []byte) (int, error) {
	n, err := t.File.Read(p)
	if n > 0 {
		keep := min(n, t.max-t.buf.Len())
		if keep < n {
			t.truncated = true
		}
		if keep > 0 {
			t.buf.Write(p[:keep])
		}
	}
	return n, err
}

func (t *teeFile) Close() error {
	t.once.Do(func() { t.done(t.buf.Bytes(), t.truncated) })
	return t.File.Close()
}

// ReadAt is not supported through the recorder; callers read sequentially.
var _ io.Reader = (*teeFile)(nil)

// String describes the recorder for logs.
func (r *Recorder) String() string { return fmt.Sprintf("recording %s", r.inner.Path()) }
