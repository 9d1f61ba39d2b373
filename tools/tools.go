//go:build tools

// Package tools pins the versions of the binaries the integration tests run
// (containerd 2.x, built by .ci/tools.sh). It is a separate module so that the
// berth module never depends on containerd's dependency tree.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
)
