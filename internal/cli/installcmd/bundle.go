package installcmd

import (
	"berth.dev/berth/internal/cli"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/present/output"
)

func newBundleCmd(g *cli.Globals) *cobra.Command {
	var fl installFlags
	cmd := &cobra.Command{
		Use:   "bundle --platform P... --manifest M -o bundle.tar",
		Short: "Pack the manifest and every file some platforms need into one tar, for an air-gapped site",
		Long: `bundle fetches (from --from, the cache or the manifest's URLs, verifying
every SHA-256) the components the platforms need and writes them with the
manifest into one uncompressed tar: manifest.yaml, then sha256/<hex> per
file. Carry it to the air-gapped node and run

  berth install --platform P --from bundle.tar

which takes the manifest and every file from the bundle. -o (or --out)
names the bundle file: the global -o takes a file name here.

Without --cache, bundle keeps no cache: each file is fetched into a
temporary directory beside the bundle, appended, and deleted; the
directory is removed at the end, whatever happens. Before fetching
anything, bundle refuses a component declaring more than
--max-component-size, and a bundle the file system of the output (and of
--cache) has no room for.`,
		Example: `  berth bundle -p kubeadm-qemu-snp -p kubeadm-qemu-tdx -m kata-3.24.yaml -o berth-bundle.tar`,
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := fl.out
			if out == "" && g.Output() != "" {
				if _, err := output.ParseFormat(g.Output()); err != nil || strings.HasSuffix(g.Output(), ".tar") {
					out = g.Output()
				}
			}
			if out == "" {
				return cli.UsageErr(errors.New("-o bundle.tar (or --out) is required: the file to write"))
			}
			ps, err := parsePlatforms(fl.platforms)
			if err != nil {
				return err
			}
			ls, bundles, err := install.Locators(fl.from)
			if err != nil {
				return cli.UsageErr(err)
			}
			f, closeFetcher, err := newFetcher(g, fl, ls, false)
			defer closeFetcher()
			if err != nil {
				return err
			}
			m, data, err := loadManifest(cmd.Context(), f, fl, bundles)
			if err != nil {
				return err
			}
			var cs []manifest.Component
			seen := map[string]bool{}
			for _, p := range ps {
				r, err := m.Installable(p, configure.Needs(p))
				if err != nil {
					return err
				}
				for _, c := range r {
					if !seen[c.Name] {
						seen[c.Name] = true
						cs = append(cs, c)
					}
				}
			}
			if err := bundleFits(f, out, data, cs); err != nil {
				return errdefs.Failed(fmt.Errorf("bundle %s: %w", out, err))
			}
			f.Progress = newProgress(g, output.Table).event
			if isTerminal(g.Stderr()) {
				var total int64
				for _, c := range cs {
					total += c.Size
				}
				bars := newBarProgress(g.Stderr(), total)
				f.Progress = bars.event
				defer bars.finish()
			}
			tmp, err := os.MkdirTemp(filepath.Dir(out), ".berth-bundle-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			part := out + ".partial"
			w, err := os.Create(part)
			if err != nil {
				return err
			}
			n, err := install.WriteBundle(cmd.Context(), w, data, cs, f, tmp)
			if err == nil {
				err = w.Sync()
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(part, out)
			}
			if err != nil {
				os.Remove(part)
				return errdefs.Failed(fmt.Errorf("bundle %s: %w", out, err))
			}
			pct := float64(n) * 100 / float64(max(m.Bytes(), 1))
			fmt.Fprintf(g.Stdout(), "wrote %s: %s %s, %d components, %s (%.0f%% of the manifest)\n", out, m.Name, m.Version, len(cs), human(n), pct)
			return nil
		},
	}
	addFetchFlags(cmd, &fl)
	f := cmd.Flags()
	f.StringVar(&fl.cache, "cache", "", "download cache, a directory on this machine (default: none; files pass through a temporary directory beside the bundle)")
	f.StringArrayVarP(&fl.platforms, "platform", "p", nil, "platform the bundle must serve; repeatable")
	f.StringVar(&fl.out, "out", "", "bundle file to write (same as -o FILE)")
	return cmd
}

// bundleFits refuses, before anything is fetched or created, a component
// above the size limit and a bundle that the output's file system (and
// the cache's) has no room for: the bundle (each distinct file once, with
// its tar headers), plus the largest file, which passes through the
// temporary directory beside it.
func bundleFits(f *fetch.Fetcher, out string, manifestData []byte, cs []manifest.Component) error {
	var items []fetch.Item
	seen := map[string]bool{}
	var largest int64
	for _, c := range cs {
		it := install.Item(c)
		if err := fetch.CheckSize(it, f.MaxItemSize); err != nil {
			return err
		}
		if seen[c.SHA256] {
			continue
		}
		seen[c.SHA256] = true
		items = append(items, it)
		largest = max(largest, c.Size)
	}
	dir := filepath.Dir(out)
	dev, free, at, err := fetch.FreeSpace(nil, dir)
	if err != nil {
		return err
	}
	// A PAX tar header is at most a few 512-byte blocks; the end is two.
	extra := int64(len(manifestData)) + int64(len(items)+1)*2048 + 1024 + largest
	needs := []fetch.SpaceNeed{{Path: at, Dev: dev, Free: free, Items: items, Extra: extra}}
	cn, err := f.CacheNeed(items)
	if err != nil {
		return err
	}
	if cn != nil {
		needs = append(needs, *cn)
	}
	return fetch.CheckSpace(needs)
}
