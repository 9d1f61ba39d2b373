package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/install"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/platform"
)

func newUninstallCmd(g *Globals) *cobra.Command {
	var fl installFlags
	var purgeCache, keepConfig bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what berth install installed under the prefix, and the runtime configuration it applied",
		Long: `uninstall first removes the runtime configuration of every platform the
prefix's installations serve (as berth config remove does, restoring
backups), then every installation, berth's links and lock file under the
prefix. Files in the prefix that berth did not create stay. The download
cache stays unless --purge-cache.`,
		Example: `  sudo berth uninstall
  sudo berth uninstall --prefix /opt/berth --purge-cache --restart`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUninstall(cmd.Context(), g, fl, purgeCache, keepConfig)
		},
	}
	addInstallPathFlags(cmd, &fl)
	f := cmd.Flags()
	f.StringVar(&fl.cache, "cache", "", "download cache (default "+manifest.DefaultCache+" under --root)")
	f.BoolVar(&purgeCache, "purge-cache", false, "also remove the download cache")
	f.BoolVar(&keepConfig, "keep-config", false, "leave the runtime configuration in place")
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime if its configuration changed")
	return cmd
}

func runUninstall(ctx context.Context, g *Globals, fl installFlags, purgeCache, keepConfig bool) error {
	l := install.Layout{Prefix: g.hostPath(fl.prefix)}
	st, err := l.Status()
	if err != nil {
		return err
	}
	var plats []string
	for _, r := range []*install.Record{st.Current, st.Previous} {
		if r == nil {
			continue
		}
		for _, p := range r.Platforms {
			if !slices.Contains(plats, p) {
				plats = append(plats, p)
			}
		}
	}
	if !keepConfig && len(plats) > 0 {
		e, closeEditor, err := g.openConfigEditor()
		defer closeEditor()
		if err != nil {
			return err
		}
		for _, s := range plats {
			p, err := platform.Parse(s)
			if err != nil {
				return fmt.Errorf("installation record names platform %q: %w", s, err)
			}
			if _, ok := e.state.Platforms[p.Name()]; !ok {
				continue
			}
			if err := e.remove(ctx, g, p.Name(), p, fl.restart); err != nil {
				return err
			}
		}
	}
	in := &install.Installer{Layout: l}
	removed, err := in.Uninstall(ctx)
	if err != nil {
		return err
	}
	if len(removed) == 0 {
		fmt.Fprintf(g.stdout, "%s: nothing installed by berth\n", l.Prefix)
	}
	for _, p := range removed {
		fmt.Fprintf(g.stdout, "removed %s\n", p)
	}
	if purgeCache {
		cache := fl.cache
		if cache == "" {
			cache = g.hostPath(manifest.DefaultCache)
		}
		dir := filepath.Join(cache, "sha256")
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("purging the cache: %w", err)
		}
		os.Remove(cache)
		fmt.Fprintf(g.stdout, "removed %s\n", dir)
	}
	return nil
}
