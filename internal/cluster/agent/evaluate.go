package agent

import (
	"context"

	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// Evaluator returns the Config.Evaluate of an agent on root: the requested
// platforms, or the host's platforms without debug variants.
func Evaluator(root hostfs.Root, opt discover.Options, requested []platform.Platform) func(context.Context) (preflight.Result, error) {
	return func(ctx context.Context) (preflight.Result, error) {
		return preflight.Run(ctx, root, preflight.Options{Discover: opt, Platforms: requested, NoDebug: true})
	}
}
