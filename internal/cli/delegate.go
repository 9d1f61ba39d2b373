package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// delegated are the commands that live in berth-cluster, with the line
// `berth help` shows for each: those that talk to Kubernetes or a CRI
// socket, and those that download or unpack (internal/cli/installcmd).
var delegated = []struct{ name, short string }{
	{"install", "Install what a platform needs from a component manifest, configure the runtime and verify it"},
	{"uninstall", "Remove what berth install installed under the prefix, and the runtime configuration it applied"},
	{"rollback", "Make the previous installation current again"},
	{"bundle", "Pack the manifest and every file some platforms need into one tar, for an air-gapped site"},
	{"agent", "Run as the node agent (DaemonSet): publish this node's report to the cluster"},
	{"fleet", "Show every node's platforms from the agents' reports"},
	{"node-installer", "Install the chosen platforms on this node, or clean them up (DaemonSet)"},
	{"runtimeclasses", "Print the RuntimeClass objects of platforms"},
	{"verify", "Prove a platform's runtime handler is live over CRI (and on the Node)"},
}

// Delegate is berth's wiring: the cluster commands run binary (berth-cluster)
// with the same arguments, so `berth fleet` works as documented while berth
// itself links neither client-go nor gRPC.
func Delegate(binary string) Wiring {
	w := Wiring{delegateTo: binary}
	for _, d := range delegated {
		w.Commands = append(w.Commands, Command{Name: d.name, New: func(g *Globals) *cobra.Command {
			return &cobra.Command{
				Use:                d.name,
				Short:              d.short + " (runs " + binary + ")",
				DisableFlagParsing: true,
				RunE: func(cmd *cobra.Command, _ []string) error {
					return g.runDelegate(cmd.Context(), binary, d.name, g.args)
				},
			}
		}})
	}
	w.Verify = func(ctx context.Context, g *Globals, p platform.Platform, suffix configure.Suffix, extra ...string) error {
		args := []string{"verify", "--platform", p.String(), "-o", g.output, "--root", g.root}
		if suffix != "" {
			args = append(args, "--install-suffix", string(suffix))
		}
		if p.Snapshotter().Setup().Proxy != "" {
			args = append(args, "--snapshotter")
		}
		if g.live {
			args = append(args, "--live")
		}
		if g.verbose > 0 {
			args = append(args, "-"+strings.Repeat("v", g.verbose))
		}
		return g.runDelegate(ctx, binary, "verify", append(args, extra...))
	}
	return w
}

// findDelegate looks for binary where berth was installed from: BERTH_CLUSTER
// names it explicitly, else beside the running berth (make build, the
// release archive and the image put them together), else on PATH.
func (g *Globals) findDelegate(binary string) (string, error) {
	if p := g.getenv("BERTH_CLUSTER"); p != "" {
		return p, nil
	}
	var tried []string
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), binary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
		tried = append(tried, filepath.Dir(self))
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	tried = append(tried, "PATH")
	return "", fmt.Errorf("this command is part of %s, which was not found (looked in %v): build it with `go build -o DIR/%s ./cmd/%s` beside berth (`make build` builds both), set BERTH_CLUSTER to its path, or from the source tree run `go run ./cmd/%s` with the same arguments",
		binary, tried, binary, binary, binary)
}

// runDelegate runs binary with args. A real process is replaced by it (exec),
// so that its PID, signals and exit code are those of the command itself;
// in tests, where the streams are not the process's own, it runs as a child.
func (g *Globals) runDelegate(ctx context.Context, binary, name string, args []string) error {
	path, err := g.findDelegate(binary)
	if err != nil {
		return UsageErr(fmt.Errorf("berth %s: %w", name, err))
	}
	if g.stdin == os.Stdin && output.Underlying(g.stdout) == os.Stdout && g.stderr == os.Stderr {
		err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
		return fmt.Errorf("running %s: %w", path, err)
	}
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = g.stdin, g.stdout, g.stderr
	err = c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ExitErr(ee.ExitCode(), errors.New(""))
	}
	if err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil
}
