package install

import (
	"fmt"
	"os"
	"syscall"
)

// Installed is the live installation of a prefix, opened to read its files
// (berth refvalues --installed measures the boot components the node
// actually has). Close it when done.
type Installed struct {
	// Record is the installation's record.
	Record *Record
	p      *prefixDir
	dir    string
	// opened are the files Open handed out, closed with the installation.
	opened []*os.File
}

// InstalledFile is a file of the live installation that matched its
// record when it was checked.
type InstalledFile struct {
	// Component is the record component that installed it.
	Component string
	// Path is its path on this machine, for messages and outputs.
	Path string
	RecordFile
}

// OpenCurrent opens the installation the prefix's current link names.
func (l Layout) OpenCurrent() (*Installed, error) {
	p, err := l.open(false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("nothing is installed: %s does not exist (berth install first, or give --prefix)", l.Dir())
	}
	id, err := p.link(currentLink)
	if err == nil && id == "" {
		err = fmt.Errorf("nothing is installed under %s: it has no %s link (berth install first)", l.Dir(), currentLink)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	r, err := p.readRecord(id)
	if err != nil {
		p.Close()
		return nil, err
	}
	if r.ID != id {
		p.Close()
		return nil, fmt.Errorf("installation %s: its record names installation %q: the record does not belong there", id, r.ID)
	}
	return &Installed{Record: r, p: p, dir: versionsDir + "/" + id}, nil
}

// Close releases the prefix and the files Open returned.
func (in *Installed) Close() error {
	for _, f := range in.opened {
		f.Close()
	}
	in.opened = nil
	return in.p.Close()
}

// File returns the one file component name installed, after checking that
// it is still what the record says berth wrote (type, size, SHA-256). A
// record without the file's digest (written before record version 2, for
// archive members) cannot vouch for it and is an error: the values must
// describe files known to be the installed ones.
func (in *Installed) File(name string) (InstalledFile, error) {
	var c *RecordComponent
	for i := range in.Record.Components {
		if in.Record.Components[i].Name == name {
			c = &in.Record.Components[i]
		}
	}
	if c == nil {
		return InstalledFile{}, fmt.Errorf("installation %s has no component %s (its record lists what it installed)", in.Record.ID, name)
	}
	files := c.files()
	if len(files) != 1 {
		return InstalledFile{}, fmt.Errorf("installation %s: component %s installed %d files; a measured boot component must be exactly one file", in.Record.ID, name, len(files))
	}
	f := files[0]
	if f.SHA256 == "" || f.Size < 0 {
		return InstalledFile{}, fmt.Errorf("installation %s: the record does not give the digest of %s (component %s): reinstall with this berth to record it", in.Record.ID, f.Path, name)
	}
	path := in.p.path(in.dir + "/" + f.Path)
	if why := in.p.changed(in.dir, f); why != "" {
		return InstalledFile{}, fmt.Errorf("installed file %s (component %s) does not match the install record: %s", path, name, why)
	}
	return InstalledFile{Component: name, Path: path, RecordFile: f}, nil
}

// Open opens an installed file for reading, through the prefix (no
// symlink is followed) until Close; the caller checks what it read against f's digest,
// since the file may change after File checked it.
func (in *Installed) Open(f InstalledFile) (*os.File, error) {
	file, err := in.p.r.OpenFile(in.dir+"/"+f.RecordFile.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening installed file %s: %w", f.Path, err)
	}
	in.opened = append(in.opened, file)
	return file, nil
}
