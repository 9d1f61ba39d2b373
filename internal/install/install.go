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
	"path/filepath"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/fetch"
	"berth.dev/berth/internal/manifest"
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
			if err != nil || names[p.String()] {
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
		cs, err := m.Resolve(p)
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

// Install installs the plan's components and makes them current.
func (in *Installer) Install(ctx context.Context, pl *Plan) (*Result, error) {
	l := in.Layout
	lk, err := l.lock()
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	if err := l.cleanTemp(); err != nil {
		return nil, err
	}
	res := &Result{Plan: pl, Dir: l.Version(pl.ID)}
	cur, err := l.link(l.Current())
	if err != nil {
		return nil, err
	}
	res.Previous = cur
	if cur == pl.ID {
		if r, ok := l.complete(pl.ID); ok {
			in.log().Info("already installed", "id", pl.ID)
			return res, l.topLinks(r)
		}
	}
	res.Changed = true
	rec, ok := l.complete(pl.ID)
	if !ok {
		if rec, err = in.stage(ctx, pl, res); err != nil {
			return res, err
		}
	}
	if cur != pl.ID && cur != "" {
		if err := l.setLink(prevLink, cur, nil); err != nil {
			return res, err
		}
	}
	if err := l.setLink(currentLink, pl.ID, in.BeforeSwitch); err != nil {
		return res, err
	}
	if err := l.topLinks(rec); err != nil {
		return res, err
	}
	prev, _ := l.link(l.Previous())
	if err := l.gc(pl.ID, prev); err != nil {
		in.log().Warn("cleaning old installations", "err", err)
	}
	return res, nil
}

// stage builds the installation in a stage directory and renames it into
// versions/.
func (in *Installer) stage(ctx context.Context, pl *Plan, res *Result) (*Record, error) {
	l := in.Layout
	if err := os.MkdirAll(l.Versions(), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", l.Versions(), err)
	}
	dir := filepath.Join(l.Versions(), fmt.Sprintf("%s%s-%d", stagePrefix, pl.ID, os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	dl := filepath.Join(dir, recordDir, "dl")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	items := make([]fetch.Item, len(pl.Components))
	dsts := map[string]string{}
	for i, c := range pl.Components {
		items[i] = Item(c)
		dst := filepath.Join(dl, c.SHA256)
		if c.Archive == nil {
			dst = filepath.Join(dir, filepath.FromSlash(c.Path))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, fmt.Errorf("staging %s: %w", c.Name, err)
			}
		}
		dsts[c.Name] = dst
	}
	fr, err := in.Fetcher.All(ctx, items, func(it fetch.Item) string { return dsts[it.Name] }, in.Parallel)
	res.Components = fr
	for _, r := range fr {
		res.Fetched += r.Fetched
	}
	if err != nil {
		return nil, fmt.Errorf("staging into %s: %w", dir, err)
	}
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	rec := &Record{ID: pl.ID, Manifest: pl.Manifest, Version: pl.Version, Digest: pl.Digest, Source: pl.m.Source(),
		Platforms: pl.Platforms, Installed: now().UTC()}
	for _, c := range pl.Components {
		rc := RecordComponent{Name: c.Name, Version: c.Version, SHA256: c.SHA256, Size: c.Size, Paths: c.InstallPaths(), Plain: c.Archive == nil}
		if c.Archive == nil {
			if err := os.Chmod(dsts[c.Name], manifest.FileMode(c.Mode)); err != nil {
				return nil, fmt.Errorf("staging %s: %w", c.Name, err)
			}
		} else if err := Extract(ctx, dsts[c.Name], c, dir); err != nil {
			return nil, fmt.Errorf("staging into %s: %w", dir, err)
		}
		rec.Components = append(rec.Components, rc)
	}
	if err := os.RemoveAll(dl); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := writeSynced(filepath.Join(dir, recordFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	final := l.Version(pl.ID)
	if err := os.RemoveAll(final); err != nil {
		return nil, fmt.Errorf("removing the incomplete %s: %w", final, err)
	}
	if err := os.Rename(dir, final); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	ok = true
	return rec, syncDir(l.Versions())
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

func writeSynced(p string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

// Rollback makes the previous installation current again (and the current
// one previous, so that a second rollback undoes the first).
func (in *Installer) Rollback(ctx context.Context) (from, to string, err error) {
	l := in.Layout
	lk, err := l.lock()
	if err != nil {
		return "", "", err
	}
	defer lk.Unlock()
	if err := l.cleanTemp(); err != nil {
		return "", "", err
	}
	cur, err := l.link(l.Current())
	if err != nil {
		return "", "", err
	}
	prev, err := l.link(l.Previous())
	if err != nil {
		return "", "", err
	}
	if prev == "" {
		return "", "", fmt.Errorf("%s: no previous installation to roll back to", l.Prefix)
	}
	rec, ok := l.complete(prev)
	if !ok {
		return "", "", fmt.Errorf("%s: the previous installation %s is incomplete: reinstall instead", l.Prefix, prev)
	}
	if err := l.setLink(currentLink, prev, in.BeforeSwitch); err != nil {
		return "", "", err
	}
	if err := l.setLink(prevLink, cur, nil); err != nil {
		return "", "", err
	}
	return cur, prev, l.topLinks(rec)
}

// Uninstall removes everything berth installed under the prefix: every
// installation, the links and the lock file; the prefix itself if that
// leaves it empty. Runtime configuration is the caller's (it must be
// removed first, while the platforms are still known).
func (in *Installer) Uninstall(ctx context.Context) ([]string, error) {
	l := in.Layout
	if _, err := os.Stat(l.Prefix); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	lk, err := l.lock()
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	var removed []string
	ents, err := os.ReadDir(l.Prefix)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		p := filepath.Join(l.Prefix, e.Name())
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(p)
		if err != nil {
			continue
		}
		t = filepath.ToSlash(t)
		if strings.HasPrefix(t, currentLink+"/") || strings.HasPrefix(t, versionsDir+"/") {
			if err := os.Remove(p); err != nil {
				return removed, err
			}
			removed = append(removed, p)
		}
	}
	if _, err := os.Stat(l.Versions()); err == nil {
		if err := os.RemoveAll(l.Versions()); err != nil {
			return removed, fmt.Errorf("removing %s: %w", l.Versions(), err)
		}
		removed = append(removed, l.Versions())
	}
	os.Remove(filepath.Join(l.Prefix, lockFile))
	os.Remove(l.Prefix) // only if empty: etc/ may hold configuration
	return removed, nil
}
