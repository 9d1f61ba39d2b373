package install

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"berth.dev/berth/internal/host/hostfs"
)

// Removal is what Uninstall did.
type Removal struct {
	// Removed are the links and installations removed, as paths on this
	// machine.
	Removed []string `json:"removed"`
	// Kept are entries berth made that it left in place because they are
	// no longer what it wrote, each with why.
	Kept []Kept `json:"kept,omitempty"`
}

// Kept is an entry uninstall left in place.
type Kept struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func (rm *Removal) keep(p, format string, a ...any) {
	rm.Kept = append(rm.Kept, Kept{Path: p, Why: fmt.Sprintf(format, a...)})
}

// Uninstall removes what berth installed under the prefix, and only that:
// the files each installation's record lists, each only if it is still
// what berth wrote (a regular file, reached through real directories, with
// the recorded SHA-256; version 1 records give the digest of plain files
// only, archive members are checked by type), then the directories that
// leaves empty; the current and previous links and the top-level links
// when they are still berth's symlinks; interrupted stage directories;
// the lock file; the prefix itself if that leaves it empty. Anything else
// stays, and an entry that changed is reported in Removal.Kept. Runtime
// configuration is the caller's (it must be removed first, while the
// platforms are still known). A prefix whose path leaves the host root is
// refused (*RefusedError) before anything is removed.
func (in *Installer) Uninstall(ctx context.Context) (*Removal, error) {
	p, err := in.Layout.open(false)
	if err != nil {
		return nil, err
	}
	rm := &Removal{}
	if p == nil {
		return rm, nil
	}
	defer p.Close()
	lk, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()

	// The records say which top-level links berth made.
	var ids []string
	var vents []fs.DirEntry
	verr := checkDirChain(p.r, p.dir, versionsDir)
	if verr != nil {
		rm.keep(p.path(versionsDir), "%s, so what is under it stays too", why(verr))
	} else if vents, verr = p.readDir(versionsDir); verr != nil && !errors.Is(verr, fs.ErrNotExist) {
		rm.keep(p.path(versionsDir), "reading it: %v", verr)
	}
	topSet := map[string]bool{}
	for _, e := range vents {
		if strings.HasPrefix(e.Name(), stagePrefix) || !e.IsDir() {
			continue
		}
		ids = append(ids, e.Name())
		if r, err := p.readRecord(e.Name()); err == nil {
			for _, t := range tops(r) {
				topSet[t] = true
			}
		}
	}

	// Links first: once they are gone nothing names the installations.
	ents, err := p.readDir(".")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		n := e.Name()
		if e.Type()&fs.ModeSymlink == 0 {
			if topSet[n] || n == currentLink || n == prevLink {
				rm.keep(p.path(n), "it is a %s now, not berth's link", hostfs.TypeName(e.Type()))
			}
			continue
		}
		t, err := p.r.Readlink(n)
		if err != nil {
			continue
		}
		t = strings.TrimSuffix(t, "/")
		ours := false
		switch {
		case n == currentLink || n == prevLink:
			id, ok := strings.CutPrefix(t, versionsDir+"/")
			ours = ok && id != "" && !strings.Contains(id, "/")
		case t == currentLink+"/"+n:
			ours = true
		case strings.Contains(n, ".tmp-"):
			ours = strings.HasPrefix(t, versionsDir+"/") || strings.HasPrefix(t, currentLink+"/")
		}
		if !ours {
			if topSet[n] || n == currentLink || n == prevLink {
				rm.keep(p.path(n), "it is a symlink to %s now, not berth's link", t)
			}
			continue
		}
		if err := p.r.Remove(n); err != nil {
			return rm, err
		}
		rm.Removed = append(rm.Removed, p.path(n))
	}

	for _, e := range vents {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, stagePrefix) && e.IsDir():
			// berth's own scratch directory from an interrupted run.
			if err := p.r.RemoveAll(versionsDir + "/" + n); err != nil {
				return rm, fmt.Errorf("removing an interrupted stage: %w", err)
			}
		case e.IsDir():
		default:
			rm.keep(p.path(versionsDir+"/"+n), "it is a %s, not an installation berth made", hostfs.TypeName(e.Type()))
		}
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return rm, err
		}
		p.removeInstallation(id, rm)
	}
	if verr == nil {
		if err := p.r.Remove(versionsDir); err == nil {
			rm.Removed = append(rm.Removed, p.path(versionsDir))
		}
	}
	p.r.Remove(lockFile)
	// The prefix itself, only if empty: etc/ may hold configuration.
	if ents, err := p.readDir("."); err == nil && len(ents) == 0 {
		if host, rel, exists, err := in.Layout.resolve(); err == nil {
			if exists && rel != "." {
				host.Remove(rel)
			}
		}
	}
	return rm, nil
}

// removeInstallation removes installation id as its record lists it.
func (p *prefixDir) removeInstallation(id string, rm *Removal) {
	vdir := versionsDir + "/" + id
	fi, err := p.r.Lstat(vdir)
	if err != nil {
		return
	}
	if !fi.IsDir() {
		rm.keep(p.path(vdir), "it is a %s, not an installation berth made", hostfs.TypeName(fi.Mode()))
		return
	}
	rec, err := p.readRecord(id)
	if err != nil {
		rm.keep(p.path(vdir), "no readable install record, so berth cannot tell what it wrote there (%s)", why(err))
		return
	}
	if rec.ID != id {
		rm.keep(p.path(vdir), "its record names installation %q", rec.ID)
		return
	}
	dirs := map[string]bool{recordDir: true}
	kept := 0
	for _, c := range rec.Components {
		for _, f := range c.files() {
			if !fs.ValidPath(f.Path) {
				rm.keep(p.path(vdir), "its record lists %q, which is not a path inside it", f.Path)
				return
			}
			for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
			if why := p.changed(vdir, f); why != "" {
				if why != "gone" {
					rm.keep(p.path(vdir+"/"+f.Path), "%s", why)
					kept++
				}
				continue
			}
			if err := p.r.Remove(vdir + "/" + f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rm.keep(p.path(vdir+"/"+f.Path), "removing it: %v", err)
				kept++
			}
		}
	}
	// The record last: it is what says the rest is berth's.
	if why := p.changed(vdir, RecordFile{Path: recordFile, Size: -1}); why == "" {
		if kept == 0 {
			p.r.Remove(vdir + "/" + recordFile)
		}
	} else if why != "gone" {
		rm.keep(p.path(vdir+"/"+recordFile), "%s", why)
	}
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	// Deepest first, so that each is empty when its turn comes.
	slices.SortFunc(ds, func(a, b string) int {
		if c := cmp.Compare(strings.Count(b, "/"), strings.Count(a, "/")); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, d := range append(ds, ".") {
		name := path.Join(vdir, d)
		fi, err := p.r.Lstat(name)
		if err != nil || !fi.IsDir() {
			continue // a symlink there was reported with the files under it
		}
		p.r.Remove(name) // only if empty
	}
	if _, err := p.r.Lstat(vdir); err == nil {
		if kept == 0 {
			rm.keep(p.path(vdir), "it holds files berth did not install")
		}
		return
	}
	rm.Removed = append(rm.Removed, p.path(vdir))
}

// changed says why f under dir is not what berth wrote ("" if it is,
// "gone" if it is not there).
func (p *prefixDir) changed(dir string, f RecordFile) string {
	name := dir + "/" + f.Path
	// Every directory on the way must be a real one: through a symlink,
	// the name would reach another file.
	cur := dir
	for _, c := range strings.Split(path.Dir(f.Path), "/") {
		if c == "." {
			break
		}
		cur += "/" + c
		fi, err := p.r.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return "gone"
		}
		if err != nil {
			return err.Error()
		}
		if !fi.IsDir() {
			return fmt.Sprintf("%s is a %s now, not the directory berth made", cur, hostfs.TypeName(fi.Mode()))
		}
	}
	fi, err := p.r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "gone"
	}
	if err != nil {
		return err.Error()
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("it is a %s now, berth installed a regular file", hostfs.TypeName(fi.Mode()))
	}
	if f.Size >= 0 && fi.Size() != f.Size {
		return fmt.Sprintf("it changed since berth installed it (%d bytes, berth wrote %d)", fi.Size(), f.Size)
	}
	if f.SHA256 == "" {
		return ""
	}
	h, err := p.hash(name)
	if err != nil {
		return err.Error()
	}
	if h != f.SHA256 {
		return fmt.Sprintf("it changed since berth installed it (sha256 %s, berth wrote %s)", h, f.SHA256)
	}
	return ""
}

func (p *prefixDir) hash(name string) (string, error) {
	f, err := p.r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p.path(name))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// why is err's reason, without RefusedError's "nothing was changed".
func why(err error) string {
	if re := (*RefusedError)(nil); errors.As(err, &re) {
		return re.Path + ": " + re.Why
	}
	return err.Error()
}
