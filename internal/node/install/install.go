package install

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

// Installer installs manifests into one prefix.
type Installer struct {
	Layout Layout
	// Fetcher gets the components' bytes.
	Fetcher *fetch.Fetcher
	// Parallel bounds concurrent fetches.
	Parallel int
	// Now is the clock of the install record.
	Now func() time.Time
	// BeforeSwitch, if set, runs after the new current link exists under
	// its temporary name and before it is renamed over current. Only tests
	// set it (to kill the installer mid-switch); the shipped binaries never
	// do.
	BeforeSwitch func()
	// Log receives progress lines; nil discards them.
	Log *slog.Logger
	// Drop are platforms of the current installation that Plan does not
	// keep: the node-installer's list no longer has them, and their
	// runtime configuration is removed before the install, so their
	// components must not be carried into the new installation. A
	// component another platform still needs stays, through that
	// platform.
	Drop []platform.Platform
}

func (in *Installer) log() *slog.Logger {
	if in.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Log
}

// Plan is what an install will do.
type Plan struct {
	ID        string   `json:"id"`
	Manifest  string   `json:"manifest"`
	Version   string   `json:"version"`
	Digest    string   `json:"digest"`
	Platforms []string `json:"platforms"`
	// Components are those of Platforms, in manifest order.
	Components []manifest.Component `json:"components"`
	// Bytes is their download size; AllBytes that of the whole manifest.
	Bytes    int64 `json:"bytes"`
	AllBytes int64 `json:"allBytes"`
	// Kept lists platforms of the current installation that the new one
	// keeps.
	Kept []string `json:"kept,omitempty"`

	m *manifest.Manifest
	// requested are the platforms asked for, in the order given: those
	// the workflow configures and verifies.
	requested []platform.Platform
}

// reservedTops are top-level names that component paths may not use:
// berth's own entries, and etc/, where runtime configuration is written.
func reservedTops() []string {
	return []string{versionsDir, currentLink, prevLink, lockFile, recordDir, "etc"}
}

// Plan resolves the components ps need, and those of the platforms the
// prefix's current installation serves: a second platform is added to, not
// swapped for, the first, and an upgrade upgrades every platform.
func (in *Installer) Plan(m *manifest.Manifest, ps []platform.Platform) (*Plan, error) {
	if len(ps) == 0 {
		return nil, errors.New("no platform to install")
	}
	names := map[string]bool{}
	var plats []platform.Platform
	for _, p := range ps {
		if !names[p.String()] {
			names[p.String()] = true
			plats = append(plats, p)
		}
	}
	pl := &Plan{Manifest: m.Name, Version: m.Version, Digest: m.Digest(), AllBytes: m.Bytes(), m: m, requested: slices.Clone(plats)}
	// The current installation's platforms are kept, across manifest
	// versions too: their runtime configuration names the prefix's stable
	// links, which must not lose the files it points at.
	if st, err := in.Layout.Status(); err == nil && st.Current != nil {
		for _, s := range st.Current.Platforms {
			p, err := platform.Parse(s)
			if err != nil || names[p.String()] || slices.ContainsFunc(in.Drop, func(d platform.Platform) bool { return d.String() == p.String() }) {
				continue
			}
			names[p.String()] = true
			plats = append(plats, p)
			pl.Kept = append(pl.Kept, p.String())
		}
	}
	slices.SortFunc(plats, func(a, b platform.Platform) int { return cmp.Compare(a.String(), b.String()) })
	want := map[string]bool{}
	owner := map[string]string{}
	for _, p := range plats {
		pl.Platforms = append(pl.Platforms, p.String())
		cs, err := m.Installable(p, configure.Needs(p))
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			want[c.Name] = true
		}
	}
	set := sha256.New()
	for _, c := range m.Components {
		if !want[c.Name] {
			continue
		}
		for _, ip := range c.InstallPaths() {
			if !filepath.IsLocal(ip) {
				return nil, fmt.Errorf("component %s: install path %q escapes the prefix", c.Name, ip)
			}
			top, _, _ := strings.Cut(ip, "/")
			if slices.Contains(reservedTops(), top) || strings.HasPrefix(top, ".") {
				return nil, fmt.Errorf("component %s: install path %q: %s/ is reserved in the prefix", c.Name, ip, top)
			}
			if o, dup := owner[ip]; dup {
				return nil, fmt.Errorf("components %s and %s both install %s for platforms %s: narrow their serves", o, c.Name, ip, strings.Join(pl.Platforms, ", "))
			}
			owner[ip] = c.Name
		}
		pl.Components = append(pl.Components, c)
		pl.Bytes += c.Size
		fmt.Fprintf(set, "%s %s\n", c.Name, c.SHA256)
	}
	pl.ID = strings.TrimPrefix(m.Digest(), "sha256:") + "-" + hex.EncodeToString(set.Sum(nil))[:12]
	return pl, nil
}

// Result is what an install did.
type Result struct {
	Plan     *Plan  `json:"plan"`
	Dir      string `json:"dir"`
	Previous string `json:"previous,omitempty"`
	// Changed is false when the installation was already current.
	Changed bool `json:"changed"`
	// Fetched counts bytes transferred from URLs.
	Fetched    int64          `json:"fetched"`
	Components []fetch.Result `json:"-"`
}

// Preflight refuses, before anything is changed, an install of pl that
// would write outside the host root or through something berth did not
// make: the prefix and its parents, berth's entries in the prefix
// (versions/, the installation's directory and record, the lock, the
// current and previous links, the top-level links), the cache; a
// component declaring more than the fetcher's MaxItemSize; and a download
// or installation the target file systems have no room for (the declared
// sizes, statfs). Its refusals are *RefusedError, *fetch.SizeError and
// *fetch.SpaceError. Install runs it first.
func (in *Installer) Preflight(ctx context.Context, pl *Plan) error {
	items := make([]fetch.Item, len(pl.Components))
	for i, c := range pl.Components {
		items[i] = Item(c)
		if in.Fetcher == nil {
			continue
		}
		if err := fetch.CheckSize(items[i], in.Fetcher.MaxItemSize); err != nil {
			return err
		}
	}
	host, rel, exists, err := in.Layout.resolve()
	if err != nil {
		return err
	}
	stageNeed := true
	if exists {
		pr, err := host.OpenRoot(rel)
		if err != nil {
			return fmt.Errorf("opening prefix %s: %w", in.Layout.Dir(), err)
		}
		p := &prefixDir{r: pr, dir: host.Path(rel)}
		defer p.Close()
		if err := p.preflight(pl); err != nil {
			return err
		}
		if _, ok := p.complete(pl.ID); ok {
			stageNeed = false
		}
	}
	var needs []fetch.SpaceNeed
	if stageNeed {
		dev, free, at, err := fetch.FreeSpace(host, deepestExisting(host, rel))
		if err != nil {
			return fmt.Errorf("prefix %s: %w", in.Layout.Dir(), err)
		}
		needs = append(needs, fetch.SpaceNeed{Path: at, Dev: dev, Free: free, Items: items})
		if in.Fetcher != nil {
			cn, err := in.Fetcher.CacheNeed(items)
			if err != nil {
				return err
			}
			if cn != nil {
				needs = append(needs, *cn)
			}
		}
	}
	return fetch.CheckSpace(needs)
}

// preflight checks berth's own entries in an existing prefix.
func (p *prefixDir) preflight(pl *Plan) error {
	if err := checkDirChain(p.r, p.dir, versionsDir+"/"+pl.ID+"/"+recordDir); err != nil {
		return err
	}
	if fi, err := p.r.Lstat(lockFile); err == nil && !fi.Mode().IsRegular() {
		return &RefusedError{Path: p.path(lockFile), Why: fmt.Sprintf("it is a %s, not berth's lock file (move it away)", hostfs.TypeName(fi.Mode()))}
	}
	for _, l := range []string{currentLink, prevLink} {
		fi, err := p.r.Lstat(l)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return &RefusedError{Path: p.path(l), Why: fmt.Sprintf("it is a %s, not berth's link into %s/ (move it away)", hostfs.TypeName(fi.Mode()), versionsDir)}
		}
		if _, err := p.link(l); err != nil {
			return &RefusedError{Path: p.path(l), Why: err.Error()}
		}
	}
	rec := &Record{}
	for _, c := range pl.Components {
		rec.Components = append(rec.Components, RecordComponent{Paths: c.InstallPaths()})
	}
	return p.topConflicts(rec)
}

// Install installs the plan's components and makes them current. It runs
// Preflight first: a refusal changes nothing.
func (in *Installer) Install(ctx context.Context, pl *Plan) (*Result, error) {
	if err := in.Preflight(ctx, pl); err != nil {
		return nil, err
	}
	p, err := in.Layout.open(true)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	lk, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	if err := p.cleanTemp(); err != nil {
		return nil, err
	}
	res := &Result{Plan: pl, Dir: in.Layout.Version(pl.ID)}
	cur, err := p.link(currentLink)
	if err != nil {
		return nil, err
	}
	res.Previous = cur
	if cur == pl.ID {
		if r, ok := p.complete(pl.ID); ok {
			in.log().Info("already installed", "id", pl.ID)
			return res, p.topLinks(r)
		}
	}
	res.Changed = true
	rec, ok := p.complete(pl.ID)
	if !ok {
		if rec, err = in.stage(ctx, p, pl, res); err != nil {
			return res, err
		}
	}
	if cur != pl.ID && cur != "" {
		if err := p.setLink(prevLink, cur, nil); err != nil {
			return res, err
		}
	}
	if err := p.setLink(currentLink, pl.ID, in.BeforeSwitch); err != nil {
		return res, err
	}
	if err := p.topLinks(rec); err != nil {
		return res, err
	}
	prev, _ := p.link(prevLink)
	if err := in.gc(p, pl.ID, prev); err != nil {
		in.log().Warn("cleaning old installations", "err", err)
	}
	return res, nil
}

// PrunePrevious removes every installation but the current one, and the
// previous link, as uninstall removes them (only the files their records
// list, each if it is still what berth wrote). The node-installer calls
// it once an install that dropped platforms is verified: the previous
// installation still serves them, and a rollback to it would name files
// of platforms whose runtime configuration is gone.
func (in *Installer) PrunePrevious(ctx context.Context) (*Removal, error) {
	p, err := in.Layout.open(false)
	if err != nil || p == nil {
		return &Removal{}, err
	}
	defer p.Close()
	lk, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	cur, err := p.link(currentLink)
	if err != nil {
		return nil, err
	}
	rm := &Removal{}
	if _, err := p.link(prevLink); err != nil {
		return nil, err
	}
	if err := p.r.Remove(prevLink); err == nil {
		rm.Removed = append(rm.Removed, p.path(prevLink))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rm, fmt.Errorf("removing %s: %w", p.path(prevLink), err)
	}
	// A top-level link of a dropped component names nothing in the
	// current installation any more.
	tops, err := p.readDir(".")
	if err != nil {
		return rm, err
	}
	for _, e := range tops {
		n := e.Name()
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if t, err := p.r.Readlink(n); err != nil || strings.TrimSuffix(t, "/") != currentLink+"/"+n {
			continue
		}
		if _, err := p.r.Lstat(currentLink + "/" + n); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := p.r.Remove(n); err != nil {
			return rm, fmt.Errorf("removing %s: %w", p.path(n), err)
		}
		rm.Removed = append(rm.Removed, p.path(n))
	}
	ents, err := p.readDir(versionsDir)
	if err != nil {
		return rm, err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, stagePrefix) || n == cur {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rm, err
		}
		p.removeInstallation(n, rm)
	}
	return rm, nil
}

// gc removes installations other than keep, as uninstall does: only the
// files their records list, each if it is still what berth wrote.
func (in *Installer) gc(p *prefixDir, keep ...string) error {
	ents, err := p.readDir(versionsDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, stagePrefix) || slices.Contains(keep, n) {
			continue
		}
		rm := &Removal{}
		p.removeInstallation(n, rm)
		for _, k := range rm.Kept {
			in.log().Warn("cleaning old installations: left in place", "path", k.Path, "why", k.Why)
		}
	}
	return nil
}

// stage builds the installation in a stage directory and renames it into
// versions/. Every write goes through the stage directory's os.Root.
func (in *Installer) stage(ctx context.Context, p *prefixDir, pl *Plan, res *Result) (*Record, error) {
	if err := p.r.MkdirAll(versionsDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", p.path(versionsDir), err)
	}
	stageName := versionsDir + "/" + fmt.Sprintf("%s%s-%d", stagePrefix, pl.ID, os.Getpid())
	if err := p.r.Mkdir(stageName, 0o755); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			p.r.RemoveAll(stageName)
		}
	}()
	dir, err := p.r.OpenRoot(stageName)
	if err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	defer dir.Close()
	display := p.path(stageName)
	dl := recordDir + "/dl"
	if err := dir.MkdirAll(dl, 0o755); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	items := make([]fetch.Item, len(pl.Components))
	dsts := map[string]string{}
	for i, c := range pl.Components {
		items[i] = Item(c)
		dst := dl + "/" + c.SHA256
		if c.Archive == nil {
			dst = c.Path
			if err := dir.MkdirAll(path.Dir(dst), 0o755); err != nil {
				return nil, fmt.Errorf("staging %s: %w", c.Name, err)
			}
		}
		dsts[c.Name] = dst
	}
	fr, err := in.Fetcher.All(ctx, items, dir, func(it fetch.Item) string { return dsts[it.Name] }, in.Parallel)
	res.Components = fr
	for _, r := range fr {
		res.Fetched += r.Fetched
	}
	if err != nil {
		return nil, fmt.Errorf("staging into %s: %w", display, err)
	}
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	rec := &Record{RecordVersion: RecordVersion, ID: pl.ID, Manifest: pl.Manifest, Version: pl.Version, Digest: pl.Digest, Source: pl.m.Source(),
		Platforms: pl.Platforms, Installed: now().UTC()}
	for _, c := range pl.Components {
		rc := RecordComponent{Name: c.Name, Version: c.Version, SHA256: c.SHA256, Size: c.Size, Paths: c.InstallPaths(), Plain: c.Archive == nil}
		if c.Archive == nil {
			mode := manifest.FileMode(c.Mode)
			if err := dir.Chmod(dsts[c.Name], mode); err != nil {
				return nil, fmt.Errorf("staging %s: %w", c.Name, err)
			}
			rc.Files = []RecordFile{{Path: c.Path, SHA256: c.SHA256, Size: c.Size, Mode: fmt.Sprintf("%04o", mode.Perm())}}
		} else {
			files, err := extractFrom(ctx, dir, dsts[c.Name], c, dir)
			if err != nil {
				return nil, fmt.Errorf("staging into %s: %w", display, err)
			}
			rc.Files = files
		}
		rec.Components = append(rec.Components, rc)
	}
	if err := dir.RemoveAll(dl); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := hostfs.WriteAtomic(hostfs.RootFS(dir), recordFile, append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("staging: %s: %w", display, err)
	}
	final := versionsDir + "/" + pl.ID
	if err := p.r.RemoveAll(final); err != nil {
		return nil, fmt.Errorf("removing the incomplete %s: %w", p.path(final), err)
	}
	if err := p.r.Rename(stageName, final); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	ok = true
	return rec, p.syncDir(versionsDir)
}

// Item is the fetch item of component c.
func Item(c manifest.Component) fetch.Item {
	it := fetch.Item{Name: c.Name, SHA256: c.SHA256, Size: c.Size, Sources: c.Sources}
	if c.Archive == nil {
		it.Names = append(it.Names, filepath.Base(c.Path))
	}
	for _, s := range c.Sources {
		if i := strings.LastIndex(s, "/"); i >= 0 && i < len(s)-1 {
			if b := s[i+1:]; !slices.Contains(it.Names, b) {
				it.Names = append(it.Names, b)
			}
		}
	}
	if !slices.Contains(it.Names, c.Name) {
		it.Names = append(it.Names, c.Name)
	}
	return it
}

// Rollback makes the previous installation current again (and the current
// one previous, so that a second rollback undoes the first).
func (in *Installer) Rollback(ctx context.Context) (from, to string, err error) {
	p, err := in.Layout.open(false)
	if err != nil {
		return "", "", err
	}
	if p == nil {
		return "", "", fmt.Errorf("%s: no previous installation to roll back to (nothing installed)", in.Layout.Dir())
	}
	defer p.Close()
	if err := checkDirChain(p.r, p.dir, versionsDir); err != nil {
		return "", "", err
	}
	lk, err := p.lock()
	if err != nil {
		return "", "", err
	}
	defer lk.Unlock()
	if err := p.cleanTemp(); err != nil {
		return "", "", err
	}
	cur, err := p.link(currentLink)
	if err != nil {
		return "", "", err
	}
	prev, err := p.link(prevLink)
	if err != nil {
		return "", "", err
	}
	if prev == "" {
		return "", "", fmt.Errorf("%s: no previous installation to roll back to", in.Layout.Dir())
	}
	rec, ok := p.complete(prev)
	if !ok {
		return "", "", fmt.Errorf("%s: the previous installation %s is incomplete: reinstall instead", in.Layout.Dir(), prev)
	}
	if err := p.topConflicts(rec); err != nil {
		return "", "", err
	}
	if err := p.setLink(currentLink, prev, in.BeforeSwitch); err != nil {
		return "", "", err
	}
	if err := p.setLink(prevLink, cur, nil); err != nil {
		return "", "", err
	}
	return cur, prev, p.topLinks(rec)
}
