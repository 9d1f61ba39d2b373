package clustercmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cluster/fleet"
	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/present/output"
)

type fleetFlags struct {
	kubeconfig string
	require    []string
	html       string
	pageSize   int64
}

func newFleetCmd(g *cli.Globals) *cobra.Command {
	var fl fleetFlags
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Show which nodes of the cluster can run which platform, and the nodes that differ from their peers",
		Long: `fleet lists the NodeReports the agents published (page by page) and
prints the node x platform matrix with identical nodes collapsed into groups
(same hardware class, same verdict on every platform), what blocks each
group, and the consistency report: for each fact that matters (kernel,
containerd, QEMU and firmware versions, TEE state, kernel modules) the
nodes that differ from the majority of the nodes of their hardware class
(CPU vendor and product line, GPU models).

A malformed NodeReport (wrong version, missing or mistyped fields) is
reported and left out; it never stops the listing.

--html FILE also writes one self-contained page (no network access: inline
CSS and JS) with the matrix as a heat map and the outliers.

Exit status: 0, or 1 when a --require platform has no ready node; 2 usage
or API errors.`,
		Example: `  berth fleet
  berth fleet --require k3s-qemu-snp-genoa --require kata-qemu-tdx
  berth fleet -o json | jq '.outliers'
  berth fleet --html fleet.html`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFleet(cmd, g, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringArrayVar(&fl.require, "require", nil, "exit 1 unless at least one node is ready for this platform (repeatable)")
	f.StringVar(&fl.html, "html", "", "also write the fleet view as a self-contained HTML page to this file")
	f.Int64Var(&fl.pageSize, "page-size", fleet.DefaultPageSize, "NodeReports per list request")
	return cmd
}

func runFleet(cmd *cobra.Command, g *cli.Globals, fl fleetFlags) error {
	format, err := g.Format(output.Table, output.JSON, output.YAML)
	if err != nil {
		return err
	}
	required, err := platformList(fl.require)
	if err != nil {
		return err
	}
	if fl.pageSize < 1 {
		return cli.UsageErr(fmt.Errorf("--page-size %d: expected at least 1", fl.pageSize))
	}
	cfg, err := kubeConfig(fl.kubeconfig)
	if err != nil {
		return cli.UsageErr(err)
	}
	// Listing thousands of reports is a handful of large requests; the
	// default client rate limit (5 QPS) would only add waiting.
	cfg.QPS, cfg.Burst = 50, 100
	rc, err := fleet.RESTClient(cfg)
	if err != nil {
		return err
	}
	nodes, bad, err := fleet.List(cmd.Context(), rc, fl.pageSize)
	if err != nil {
		return err
	}
	a := fleet.Analyze(nodes, bad)
	if fl.html != "" {
		if err := writeFileAtomic(fl.html, func(w io.Writer) error { return fleet.WriteHTML(w, a, time.Now()) }); err != nil {
			return err
		}
	}
	if err := output.Render(g.Stdout(), format, a, func(w io.Writer) error { return fleet.WriteText(w, a) }); err != nil {
		return err
	}
	var missing []string
	for _, p := range required {
		if s, _ := a.PlatformSummary(p.Name()); s.Usable() == 0 {
			missing = append(missing, p.Name())
		}
	}
	if len(missing) > 0 {
		return errdefs.NotReady(fmt.Errorf("no node is ready for %s", strings.Join(missing, ", ")))
	}
	return nil
}

// writeFileAtomic writes a file through a synced temporary file in the
// same directory (hostfs.WriteAtomic), so that a reader never sees half a
// page and a symlink planted at the name is replaced, not written through.
func writeFileAtomic(name string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	dir, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	defer dir.Close()
	if err := hostfs.WriteAtomic(hostfs.RootFS(dir), filepath.Base(name), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
