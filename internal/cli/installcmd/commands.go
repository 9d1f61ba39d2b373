// Package installcmd holds berth's commands that install, download or
// unpack: install, uninstall, rollback and bundle. They live in
// berth-cluster, beside the cluster commands, so that berth itself links
// neither the HTTP and TLS stack nor the zstd decoder (their package
// initialisation was half of every berth command's start-up; README,
// "Two binaries"); berth runs berth-cluster for them.
package installcmd

import (
	"berth.dev/berth/internal/cli"
)

// Commands are the commands of this package, for a binary's cli.Wiring.
func Commands() []cli.Command {
	return []cli.Command{
		{Name: "install", New: newInstallCmd},
		{Name: "uninstall", New: newUninstallCmd},
		{Name: "rollback", New: newRollbackCmd},
		{Name: "bundle", New: newBundleCmd},
	}
}
