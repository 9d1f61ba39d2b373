package cli

import (
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/present/factstable"
	"berth.dev/berth/internal/present/output"
)

// OpenRoot opens the host root selected by --root and --live. Every
// command that inspects a host goes through it; cleanup is never nil. A
// root that cannot be opened (missing, not a snapshot, escaping paths) is
// a usage error.
//
// The cleanup is also registered with the run: SIGINT, SIGTERM or a closed
// stdout remove the unpacked snapshot even when the command does not
// return (Run).
func (g *Globals) OpenRoot() (hostfs.Root, func(), error) {
	if g.life.isClosed() {
		return nil, func() {}, errInterrupted
	}
	// Only a snapshot, unpacked into a temporary directory, is something
	// to undo: announced (and signals subscribed) before it is created.
	began := false
	root, cleanup, err := hostfs.OpenUnpacking(g.root, g.live, func() error {
		if !g.life.begin() {
			return errInterrupted
		}
		began = true
		return nil
	})
	if began {
		cleanup = g.life.end(cleanup)
	}
	if errors.Is(err, errInterrupted) {
		return nil, cleanup, err
	}
	if err == nil {
		afterOpenRoot(g, root.Path())
	}
	if err != nil {
		return nil, cleanup, UsageErr(err)
	}
	if g.log != nil {
		g.log.Info("host root", "path", root.Path(), "live", root.Live())
	}
	return root, cleanup, nil
}

// DiscoverOptions are the discovery options the global flags imply.
func (g *Globals) DiscoverOptions(probe bool) discover.Options {
	return discover.Options{Now: time.Now, Probe: probe, Log: g.log}
}

func newFactsCmd(g *Globals) *cobra.Command {
	var probe, schema bool
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "Print everything berth knows about the host, with the reason for every unknown fact",
		Long: `facts discovers the host root (the live system, --root DIR or --root
SNAPSHOT.tar.gz) and prints one versioned document: CPU, virtualisation,
kernel, devices, IOMMU and GPUs, TEE, runtimes, distribution and binaries.
Whatever could not be determined is listed under "unknown" with the reason.
--schema prints the JSON Schema of the document instead.`,
		Args:        NoArgs,
		Annotations: map[string]string{AnnotationEarlyStart: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if schema {
				g.life.awaitSignals()
				_, err := io.WriteString(g.stdout, facts.Schema())
				return err
			}
			format, err := g.Format()
			if err != nil {
				return err
			}
			root, cleanup, err := g.OpenRoot()
			defer cleanup()
			if err != nil {
				return err
			}
			f := discover.Run(cmd.Context(), root, g.DiscoverOptions(probe))
			if err := interrupted(cmd.Context()); err != nil {
				return err
			}
			g.life.awaitSignals() // AnnotationEarlyStart
			return output.Render(g.stdout, format, f, func(w io.Writer) error { return factstable.Write(w, f) })
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", false, "also run live probes that start processes or map device memory (the QEMU probe, the NVIDIA GPUs' CC-mode registers); live roots only")
	cmd.Flags().BoolVar(&schema, "schema", false, "print the JSON Schema of the facts document and exit")
	return cmd
}

// errNoSnapshotFile explains how snapshot is called.
var errNoSnapshotFile = errors.New("berth snapshot needs the archive to write: -o FILE.tar.gz (or -o - for stdout)")
