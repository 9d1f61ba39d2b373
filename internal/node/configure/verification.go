package configure

// Verification is what the running runtime said about one platform's
// handler (berth verify, asked after install and after a transactional
// apply).
type Verification struct {
	Platform string `json:"platform"`
	Handler  string `json:"handler"`
	Live     bool   `json:"live"`
	// Runtime is the runtime's name and version, when it answered.
	Runtime string `json:"runtime,omitempty"`
	Socket  string `json:"socket,omitempty"`
	// Handlers are the handlers the runtime has, when it answered.
	Handlers []string `json:"handlers,omitempty"`
	// Error says why the runtime could not be asked, or why the sandbox
	// proving the handler failed (then Live is false).
	Error string `json:"error,omitempty"`
	// Sandbox is the outcome of proving the handler with a pod sandbox
	// (pass, fail, skip; "" when not tried) and SandboxReason why it was
	// skipped: a skip is not a pass, and says so.
	Sandbox       string `json:"sandbox,omitempty"`
	SandboxReason string `json:"sandboxReason,omitempty"`
	// Snapshotter is the proxy snapshotter the handler names (berth's
	// nydus-snapshotter), when it was proven: SnapshotterError says why it
	// is not live (not loaded by the runtime, or not answering), and the
	// handler is then not Live either, since no pod's image can be pulled.
	Snapshotter      string `json:"snapshotter,omitempty"`
	SnapshotterError string `json:"snapshotterError,omitempty"`
}
