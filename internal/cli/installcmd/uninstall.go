package installcmd

import (
	"berth.dev/berth/internal/cli"

	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

func newUninstallCmd(g *cli.Globals) *cobra.Command {
	var fl installFlags
	var purgeCache, keepConfig, force bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what berth install installed under the prefix, and the runtime configuration it applied",
		Long: `uninstall first removes the runtime configuration of every platform the
prefix's installations serve (as berth config remove does, restoring
backups), then every installation, berth's links and lock file under the
prefix. It deletes only what the installations' records list, and each
only if it is still what berth wrote (a regular file with the recorded
SHA-256; berth's links still pointing where berth pointed them): an entry
that changed, or became a symlink, is left in place with a warning. Files
in the prefix that berth did not create stay. A prefix (or cache) whose
path leaves --root through a symlink is refused before anything is
removed (exit 1). The download cache stays unless --purge-cache, which
removes the files berth put there.

On a running system (--root / or --live) it first asks the runtime over
CRI which pods run on the handlers of the platforms it would remove, and
refuses (exit 1, nothing removed) while any does, naming them
(namespace/name, up to 10 and a count), or while the runtime cannot be
asked; --force removes anyway and says what it overrode. This holds with
--keep-config too: the shim and guest images the pods use would go.`,
		Example: `  sudo berth uninstall
  sudo berth uninstall --prefix /opt/berth --purge-cache --restart`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUninstall(cmd.Context(), g, fl, purgeCache, keepConfig, force)
		},
	}
	addInstallPathFlags(cmd, &fl)
	f := cmd.Flags()
	f.StringVar(&fl.cache, "cache", "", "download cache, a directory on this machine (default "+manifest.DefaultCache+" inside --root)")
	f.BoolVar(&purgeCache, "purge-cache", false, "also remove the download cache")
	f.BoolVar(&keepConfig, "keep-config", false, "leave the runtime configuration in place")
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime if its configuration changed")
	f.BoolVar(&force, "force", false, "uninstall even while pods run on the platforms' handlers on this node, or when the runtime cannot say which do")
	return cmd
}

func runUninstall(ctx context.Context, g *cli.Globals, fl installFlags, purgeCache, keepConfig, force bool) error {
	target, l, err := fl.targetLayout(g)
	if err != nil {
		return err
	}
	// Status resolves the prefix inside the root: one that leaves it is
	// refused here, before the configuration or anything else is removed.
	st, err := l.Status()
	if err != nil {
		return err
	}
	var cache *cacheDir
	if purgeCache {
		c, err := openCache(g, fl.cache)
		if err != nil {
			return err
		}
		defer c.Close()
		cache = c
	}
	plats := st.Platforms()
	if err := guardUninstall(ctx, g, plats, target.Suffix, force); err != nil {
		return err
	}
	if !keepConfig && len(plats) > 0 {
		if err := g.RemovePlatformConfigs(ctx, plats, target.Suffix, fl.restart); err != nil {
			return err
		}
	}
	in := &install.Installer{Layout: l}
	rm, err := in.Uninstall(ctx)
	if err != nil {
		return err
	}
	if len(rm.Removed) == 0 && len(rm.Kept) == 0 {
		fmt.Fprintf(g.Stdout(), "%s: nothing installed by berth\n", l.Dir())
	}
	for _, p := range rm.Removed {
		fmt.Fprintf(g.Stdout(), "removed %s\n", p)
	}
	for _, k := range rm.Kept {
		fmt.Fprintf(g.Stderr(), "warning: left %s in place: %s\n", k.Path, k.Why)
	}
	if cache != nil {
		n, err := cache.purge()
		if err != nil {
			return fmt.Errorf("purging the cache: %w", err)
		}
		fmt.Fprintf(g.Stdout(), "removed %d files from the cache %s\n", n, cache.path)
	}
	return nil
}

// cacheDir is the download cache opened for purging.
type cacheDir struct {
	r    *os.Root // nil: there is no cache
	path string
	// host is the host root the default cache was resolved in, or nil.
	host *hostfs.Writable
	rel  string
}

func (c *cacheDir) Close() {
	if c.r != nil {
		c.r.Close()
	}
}

// openCache opens the cache --cache names (a directory on this machine),
// or /var/cache/berth inside --root, resolved there and refused when it
// leaves the root, without creating it.
func openCache(g *cli.Globals, flag string) (*cacheDir, error) {
	if flag != "" {
		r, err := os.OpenRoot(flag)
		if errors.Is(err, fs.ErrNotExist) {
			return &cacheDir{path: flag}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		return &cacheDir{r: r, path: flag}, nil
	}
	host, err := g.Writable()
	if err != nil {
		return nil, err
	}
	rel, exists, err := install.ResolveIn(host, manifest.DefaultCache)
	if err != nil {
		if re := (*install.RefusedError)(nil); errors.As(err, &re) {
			re.Path = "cache " + re.Path
		}
		return nil, err
	}
	c := &cacheDir{path: host.Path(rel), host: host, rel: rel}
	if exists {
		if c.r, err = host.OpenRoot(rel); err != nil {
			c.Close()
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
	return c, nil
}

// purge removes what berth put into the cache: the files in sha256/ named
// by a digest (and partial downloads of them), then sha256/ and the cache
// directory when that leaves them empty. Anything else stays.
func (c *cacheDir) purge() (int, error) {
	if c.r == nil {
		return 0, nil
	}
	fi, err := c.r.Lstat("sha256")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s/sha256 is not berth's directory (it is a %v): left in place", c.path, fi.Mode().Type())
	}
	d, err := c.r.Open("sha256")
	if err != nil {
		return 0, err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".partial")
		if !e.Type().IsRegular() || !isHexDigest(name) {
			continue
		}
		if err := c.r.Remove("sha256/" + e.Name()); err != nil {
			return n, err
		}
		n++
	}
	c.r.Remove("sha256")
	if c.host != nil && c.rel != "." {
		c.host.Remove(c.rel) // only if empty
	} else if c.host == nil {
		os.Remove(c.path) // only if empty
	}
	return n, nil
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// guardUninstall refuses the uninstall while pods run on the handlers of
// plats (the installations' platforms) on this node (cli.GuardRemoval).
func guardUninstall(ctx context.Context, g *cli.Globals, plats []string, suffix configure.Suffix, force bool) error {
	if len(plats) == 0 {
		return nil
	}
	var ps []platform.Platform
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("the installation record names platform %q: %w", s, err)
		}
		ps = append(ps, p)
	}
	w, err := g.Writable()
	if err != nil {
		return err
	}
	st, err := configure.LoadState(w)
	if err != nil {
		return err
	}
	return g.GuardRemoval(ctx, cli.RemovalsOf(ps, suffix, st), suffix, st, force)
}
