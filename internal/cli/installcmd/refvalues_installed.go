package installcmd

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/platform"
)

// InstalledBoot is refvalues --installed's reader (cli.Wiring.InstalledBoot):
// the boot components of p from the live installation under prefix. The
// manifest (given, or the one the record names) says which components they
// are, the record which files they became, and each file must still match
// the record.
func InstalledBoot(g *cli.Globals, prefix, manifestRef string, p platform.Platform) (*cli.InstalledBoot, error) {
	w, err := g.Writable()
	if err != nil {
		return nil, err
	}
	inst, err := install.Layout{Root: w, Prefix: prefix}.OpenCurrent()
	if err != nil {
		return nil, err
	}
	ib, err := installedBoot(g, manifestRef, p, inst)
	if err != nil {
		inst.Close()
		return nil, err
	}
	return ib, nil
}

func installedBoot(g *cli.Globals, manifestRef string, p platform.Platform, inst *install.Installed) (*cli.InstalledBoot, error) {
	rec := inst.Record
	served := false
	for _, name := range rec.Platforms {
		if q, err := platform.Parse(name); err == nil && q == p {
			served = true
		}
	}
	if !served {
		return nil, cli.UsageErr(fmt.Errorf("installation %s serves %v, not %s: its boot components are not that platform's", rec.ID, rec.Platforms, p))
	}
	refText := manifestRef
	if refText == "" {
		refText = rec.Source + "@sha256:" + strings.TrimPrefix(rec.Digest, "sha256:")
	}
	ref, err := manifest.ParseRef(refText)
	if err != nil {
		return nil, cli.UsageErr(fmt.Errorf("manifest of installation %s: %w", rec.ID, err))
	}
	m, err := manifest.LoadRef(ref)
	if err != nil {
		return nil, fmt.Errorf("manifest of installation %s: %w", rec.ID, err)
	}
	if strings.TrimPrefix(m.Digest(), "sha256:") != strings.TrimPrefix(rec.Digest, "sha256:") {
		return nil, cli.UsageErr(fmt.Errorf("manifest %s has sha256 %s, installation %s was installed from %s: give the manifest it was installed from", m.Source(), m.Digest(), rec.ID, rec.Digest))
	}
	boot, err := m.Boot(p)
	if err != nil {
		return nil, err
	}
	ib := &cli.InstalledBoot{Recorded: map[string]cli.RecordedFile{}, Close: inst.Close}
	take := func(role string, c manifest.Component) (refvalues.Component, error) {
		file, err := inst.File(c.Name)
		if err != nil {
			return refvalues.Component{}, err
		}
		if c.Archive == nil && (file.SHA256 != c.SHA256 || file.Size != c.Size) {
			return refvalues.Component{}, fmt.Errorf("installed %s %s: sha256 %s (%d bytes) in the record, the manifest says %s (%d bytes)", role, file.Path, file.SHA256, file.Size, c.SHA256, c.Size)
		}
		rc, err := inst.Open(file)
		if err != nil {
			return refvalues.Component{}, err
		}
		g.Log().Info("installed component", "role", role, "name", c.Name, "path", file.Path)
		ib.Recorded[role] = cli.RecordedFile{Path: file.RecordFile.Path, SHA256: file.SHA256, Size: file.Size}
		return refvalues.Reader(file.Path, rc), nil
	}
	if ib.Firmware, err = take("firmware", boot.Firmware); err != nil {
		return ib, err
	}
	if !p.TEE().MeasuresDirectBoot() {
		return ib, nil
	}
	if ib.Kernel, err = take("kernel", boot.Kernel); err != nil {
		return ib, err
	}
	if boot.Initrd != nil {
		if ib.Initrd, err = take("initrd", *boot.Initrd); err != nil {
			return ib, err
		}
	}
	ib.Cmdline = &boot.Cmdline
	return ib, nil
}
