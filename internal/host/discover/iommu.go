package discover

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

// runIOMMU fills Facts.IOMMU.
//
// Policy: a missing ACPI table or groups directory is the fact "no IOMMU"
// when its parent directory is readable; only an unreadable parent makes
// the fact unknown. dma_entry_limit is unknown ("vfio_iommu_type1 not
// loaded") when the module is absent, since it gets loaded on first use.
func runIOMMU(_ context.Context, s *session, f *facts.Facts) {
	const tables = "sys/firmware/acpi/tables"
	if _, err := s.root.FS().Stat(tables); err != nil {
		s.unknownf("iommu.acpiTable", "%s", ReadReason(tables, err))
	} else {
		for _, t := range []string{"DMAR", "IVRS"} {
			if s.exists(tables + "/" + t) {
				f.IOMMU.ACPITable = t
				break
			}
		}
	}

	const groups = "sys/kernel/iommu_groups"
	ents, err := s.root.FS().ReadDir(groups)
	switch {
	case err == nil:
		f.IOMMU.Groups = len(ents)
	case errors.Is(err, fs.ErrNotExist) && s.exists("sys/kernel"):
		f.IOMMU.Groups = 0 // kernel built without IOMMU support
	default:
		s.unknownf("iommu.groups", "%s", ReadReason(groups, err))
	}

	if cmdline, ok := s.procCmdline(); ok {
		f.IOMMU.CmdlineFlags = iommuFlags(cmdline)
	} else {
		s.unknownf("iommu.cmdlineFlags", "%s: proc/cmdline (see kernel.cmdline)", facts.ReasonMissing)
	}

	const limit = "sys/module/vfio_iommu_type1/parameters/dma_entry_limit"
	if !s.exists("sys/module/vfio_iommu_type1") {
		s.unknownf("iommu.vfioDmaEntryLimit", "%s: vfio_iommu_type1 not loaded", facts.ReasonMissing)
	} else if v, ok := s.readString("iommu.vfioDmaEntryLimit", limit); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.unknownf("iommu.vfioDmaEntryLimit", "%s", unparseable(limit, 1, "expected an integer, got "+strconv.Quote(v)))
		} else {
			f.IOMMU.VFIODMAEntryLimit = &n
		}
	}
}

// iommuFlags returns the IOMMU-related parameters of a kernel command line.
func iommuFlags(cmdline string) []string {
	var out []string
	for _, p := range kernelParams(cmdline) {
		key, _, _ := strings.Cut(p, "=")
		key = strings.ReplaceAll(key, "-", "_")
		switch {
		case key == "iommu", strings.HasPrefix(key, "iommu."),
			strings.HasPrefix(key, "intel_iommu"), strings.HasPrefix(key, "amd_iommu"):
			out = append(out, p)
		}
	}
	return out
}

// kernelParams splits a kernel command line into parameters as the kernel
// does: on spaces outside double quotes, stopping at "--" (what follows is
// for init). Quotes are removed.
func kernelParams(cmdline string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote bool
		any   bool
	)
	flush := func() bool {
		if !any {
			return true
		}
		p := cur.String()
		cur.Reset()
		any = false
		if p == "--" {
			return false
		}
		out = append(out, p)
		return true
	}
	for _, r := range cmdline {
		switch {
		case r == '"':
			quote = !quote
			any = true
		case !quote && (r == ' ' || r == '\t' || r == '\n'):
			if !flush() {
				return out
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	flush()
	return out
}
