package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli/buildinfo"
	"berth.dev/berth/internal/present/output"
)

func newVersionCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print berth's version, commit and Go version",
		Args:  NoArgs,
		// It only prints (AnnotationEarlyStart: no signal subscription).
		Annotations: map[string]string{AnnotationEarlyStart: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.Format()
			if err != nil {
				return err
			}
			info := buildinfo.Get()
			return output.Render(g.stdout, f, info, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "berth %s\ncommit: %s\ngo: %s\nplatform: %s\n", info.Version, info.Commit, info.GoVersion, info.Platform)
				return err
			})
		},
	}
}
