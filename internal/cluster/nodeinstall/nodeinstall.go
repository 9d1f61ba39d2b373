// Package nodeinstall is what `berth node-installer` does on one node of a
// cluster, run by a DaemonSet with the host's / mounted: in install mode it
// runs the preflight of each platform the operator chose, installs the
// ready ones (berth install's workflow: fetch, verify, atomic switch),
// applies their runtime configuration with a transactional restart of the
// container runtime through systemd, and labels the node; a platform that
// is not ready gets no files, a label saying so and a Node Event naming
// the failing check. A platform berth installed that the list no longer
// has is removed (its runtime configuration, with a verified restart that
// rolls back on failure, its files and its label); a listed platform that
// is no longer ready is labelled so and left installed, since its pods
// may be running. In cleanup mode it removes the runtime configuration
// (restarting and verifying again), everything berth installed under the
// prefix, and its labels.
//
// The package parses no flags: the command (internal/cli/clustercmd) turns
// them into Options, which Options.Check and Settings.Config check and
// make into a Config. Runs are idempotent: a second run changes no file,
// restarts nothing and writes no label.
//
// One file per operation: nodeinstall.go (the Config, the Installer and
// Run), installrun.go (an install run), cleanup.go (cleanup mode),
// runtime.go (the runtime as the installer drives and proves it),
// prefix.go (the directories it creates), lease.go (one restart at a
// time across the cluster), dispatch.go (job mode) and teardown.go (the
// Helm pre-delete hook).
package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/platform"
)

// Mode is what a run does: install or clean up.
type Mode string

// The modes.
const (
	ModeInstall Mode = "install"
	ModeCleanup Mode = "cleanup"
)

// ModeEnv is the environment variable that selects the mode when the flag
// is not given: the Helm pre-delete hook switches the DaemonSet to cleanup
// by setting it in the pod template (see Teardown).
const ModeEnv = "BERTH_NODE_INSTALLER_MODE"

// ParseMode parses a --mode value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeInstall, ModeCleanup:
		return Mode(s), nil
	}
	return "", fmt.Errorf("mode %q: expected install or cleanup", s)
}

// Labels, field manager and Event reasons of the node-installer.
const (
	// InstalledLabelPrefix + platform name is "true" on a node where the
	// platform was installed and its handler is live, "no" where its
	// checks fail.
	InstalledLabelPrefix = configure.InstalledLabelPrefix
	// KataDeployLabel is the label kata-deploy puts on a node once Kata is
	// installed; its RuntimeClasses and docs select on it.
	KataDeployLabel = "katacontainers.io/kata-runtime"
	// FieldManager owns the installer's labels (server-side apply), apart
	// from the agent's berth-agent, so that neither removes the other's.
	FieldManager = configure.NodeInstallerFieldManager
	// ReasonNotReady is the Event reason on a Node where a chosen platform
	// is not ready.
	ReasonNotReady = "BerthPlatformNotReady"
	// ReasonInstallFailed is the Event reason when installing or
	// configuring a ready platform failed.
	ReasonInstallFailed = "BerthInstallFailed"
	// ReasonRemovalBlocked is the Event reason when cleanup or the removal
	// of a dropped platform is refused because pods run on its handler
	// (or the runtime could not say which do).
	ReasonRemovalBlocked = "BerthRemovalBlocked"
	// maxLabelName is the limit of a label key's name part.
	maxLabelName = 63
)

// InstalledLabel is the installed label of p for the install of suffix s
// (berth.dev/installed.<name>[-<suffix>]), and false when the key would
// be too long (such a platform is installed but not labelled: a cut name
// could select the wrong platform).
func InstalledLabel(s configure.Suffix, p platform.Platform) (string, bool) {
	key := s.InstalledLabel(p)
	return key, len(strings.TrimPrefix(key, v1alpha1.LabelPrefix)) <= maxLabelName
}

// fieldManager owns this install's labels and annotation: each suffix its
// own, so that one release's apply never takes away another's labels.
func (c Config) fieldManager() string { return c.Suffix.FieldManager() }

// statusAnnotation is the install-status annotation of this install:
// berth.dev/install-status, suffixed for a side-by-side install (the
// agent reads the unsuffixed one).
func (c Config) statusAnnotation() string { return c.Suffix.StatusAnnotation() }

// Config is one node's installer.
type Config struct {
	// NodeName is the Node this pod runs on.
	NodeName string
	// Root is the host root, read by the preflight (discovery).
	Root hostfs.Root
	// Writable is the same host root opened for writing (/host): the
	// prefix and the runtime configuration are written through it.
	Writable *hostfs.Writable
	// Platforms are the platforms the operator chose; install mode needs
	// at least one.
	Platforms []platform.Platform
	// Install is the install this installer runs, as configure.NewInstall
	// defaulted and validated it: its Prefix (as the host names it,
	// /opt/berth), KataConfigDir and Suffix, which names the handlers, the
	// installed labels, the install-status annotation and the field
	// manager.
	configure.Install
	// Custom is the runtime layout of the custom distribution's platforms
	// (their config file, unit and socket); nil when none is custom.
	Custom *platform.Layout
	// ConfigVersion is the containerd config version to write when the
	// node's containerd version is unknown (0: refuse then).
	ConfigVersion int
	// Manifest is the release to install (install mode).
	Manifest *manifest.Manifest
	// Fetcher gets the components (install mode).
	Fetcher *fetch.Fetcher
	// Parallel bounds concurrent downloads (0: 4).
	Parallel int
	// Discover are the discovery options of the preflight.
	Discover discover.Options
	// Check turns the preflight's results into verdicts: checks the
	// operator chose to ignore (--ignore) count as warnings, as with
	// berth check and berth install.
	Check check.Options
	// Runtime returns the running container runtime of a layout (its
	// active unit, restarted through systemd, and its CRI socket).
	Runtime func(ctx context.Context, l platform.Layout) (configure.Runtime, error)
	// RestartLease, when set, serialises runtime restarts across the
	// cluster's nodes (nil: no lock, as on one host).
	RestartLease *RestartLease
	// Sandbox, when set, proves each handler found live by starting a
	// pod sandbox with it (the last step of an install): a handler listed
	// by the runtime can still fail at every pod start (a shim or
	// hypervisor that does not run). A sandbox that fails counts as a
	// handler that is not live; one that cannot run on this node (no
	// usable /dev/kvm) is logged as skipped.
	Sandbox *SandboxCheck
	// KataDeployLabels also sets kata-deploy's KataDeployLabel on a node
	// where a platform was installed.
	KataDeployLabels bool
	// Pods, when set, lists the pods running on handlers in the runtime
	// of layout l (cri.Endpoint.RunningPods): cleanup and the removal of a
	// platform dropped from the list then refuse, before anything is
	// removed, while a pod runs on a handler they would take away, or
	// while the runtime cannot say (podguard). nil guards nothing.
	Pods func(ctx context.Context, l platform.Layout, handlers []string) ([]podguard.Pod, error)
	// ForceRemove removes a platform even while pods run on its handler
	// (or the runtime cannot say), logging what was forced.
	ForceRemove bool
	// StartupTaints are removed from the Node after a run in which every
	// platform's handler is verified live, and kept after any other.
	StartupTaints []*StartupTaint
	// ContainerdDropIn is the operator's containerd drop-in, written
	// beside the handlers' drop-ins of every containerd platform and
	// removed with the last (configure.Options.ContainerdUserDropIn); nil:
	// none.
	ContainerdDropIn []byte
	// AdvertiseTEEKeys advertises, in the Node's status.capacity, the
	// number of keys of each TEE an installed platform uses
	// (ResourceSNPKeys, ResourceTDXKeys), where the host's facts give it;
	// without it, any the installer advertised before are removed.
	AdvertiseTEEKeys bool
	// Kata are the operator's Kata options per platform (by
	// platform.String()): drop-in, agent proxy, annotation allowlist.
	Kata map[string]configure.KataOptions
	// CustomRuntimes are handlers of their own made from installed
	// platforms (kata-deploy's customRuntimes), applied after their base.
	CustomRuntimes []configure.CustomRuntime
	// Log receives progress; nil discards.
	Log *slog.Logger
	// Now is the clock of Events; nil is time.Now.
	Now func() time.Time
}

// Installer runs the node-installer on one node. Build it with New.
type Installer struct {
	cfg Config
	dyn dynamic.Interface

	mu    sync.Mutex
	ready bool
}

// New checks cfg and returns an installer using the given client.
func New(cfg Config, dyn dynamic.Interface) (*Installer, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node-installer: no node name (--node-name or NODE_NAME)")
	}
	if cfg.Root == nil || cfg.Writable == nil {
		return nil, errors.New("node-installer: no host root")
	}
	if cfg.Prefix == "" || cfg.Prefix[0] != '/' {
		return nil, fmt.Errorf("node-installer: prefix %q: expected an absolute path on the host", cfg.Prefix)
	}
	if cfg.Runtime == nil {
		return nil, errors.New("node-installer: no container runtime to restart")
	}
	for _, p := range cfg.Platforms {
		if p.Distribution().UserLayout() && cfg.Custom == nil {
			return nil, fmt.Errorf("node-installer: platform %s is for a custom distribution: give its runtime's config file and unit", p)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	return &Installer{cfg: cfg, dyn: dyn}, nil
}

// Ready reports whether the last run finished: /readyz, which holds the
// DaemonSet's rollout on this node until then.
func (n *Installer) Ready() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready
}

func (n *Installer) setReady() {
	n.mu.Lock()
	n.ready = true
	n.mu.Unlock()
}

// Health serves /healthz (the process runs) and /readyz (this node is
// done).
func (n *Installer) Health() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !n.Ready() {
			http.Error(w, "the node-installer has not finished on this node", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Status is the outcome for one platform.
type Status string

// The platform outcomes: StatusRemoved is cleanup's, and an install
// run's for a platform dropped from the list.
const (
	StatusInstalled Status = "installed"
	StatusNotReady  Status = "not-ready"
	StatusRemoved   Status = "removed"
)

// PlatformResult is what a run did for one platform.
type PlatformResult struct {
	Platform string `json:"platform"`
	Status   Status `json:"status"`
	// Label is the installed label key ("" when the name does not fit).
	Label string `json:"label,omitempty"`
	// Blocker, Message and Remedy name the first failing check of a
	// platform that is not ready.
	Blocker string `json:"blocker,omitempty"`
	Message string `json:"message,omitempty"`
	Remedy  string `json:"remedy,omitempty"`
}

// Report is what one run did.
type Report struct {
	Mode      Mode             `json:"mode"`
	Node      string           `json:"node"`
	Platforms []PlatformResult `json:"platforms"`
	// Changed lists the files of the runtime configuration written or
	// restored, and says whether the installation changed.
	Changed   []string `json:"changed,omitempty"`
	Installed bool     `json:"installed"`
	// Restarts counts runtime restarts (0 when nothing changed).
	Restarts int `json:"restarts"`
	// Handlers are the runtime's handlers after the run, per unit.
	Handlers map[string][]string `json:"handlers,omitempty"`
	// Removed and Kept are what cleanup removed under the prefix and what
	// it left because it changed since berth wrote it.
	Removed []string       `json:"removed,omitempty"`
	Kept    []install.Kept `json:"kept,omitempty"`
	// Labels are the labels the installer owns on the node after the run;
	// LabelsChanged is false when they and the install status were
	// already so.
	Labels        map[string]string `json:"labels"`
	LabelsChanged bool              `json:"labelsChanged"`
	// InstallStatus is the outcome recorded in the Node's
	// v1alpha1.InstallStatusAnnotation (nil after cleanup, which removes
	// it), which the agent publishes in the NodeReport.
	InstallStatus *v1alpha1.InstallStatus `json:"installStatus,omitempty"`
	// TaintRemoved says the run removed the startup taint from the Node.
	TaintRemoved bool `json:"taintRemoved,omitempty"`
	// TEEKeys are the TEE keys of the installed platforms (AdvertiseTEEKeys):
	// those counted are advertised, the others say why not.
	// TEEKeysChanged says the run wrote the Node's status.
	TEEKeys        []TEEKeys `json:"teeKeys,omitempty"`
	TEEKeysChanged bool      `json:"teeKeysChanged,omitempty"`
	// Events are the reasons of the Events written.
	Events []string `json:"events,omitempty"`
	// Blocked are the pods that kept a removal from going ahead (or,
	// with ForceRemove, that were running when it went ahead anyway).
	Blocked []podguard.Pod `json:"blocked,omitempty"`
	// Forced says what ForceRemove overrode.
	Forced string `json:"forced,omitempty"`
}

// Run runs mode once; on success the installer is ready. An install that
// fails on a ready platform leaves an Event on the Node and returns the
// error: the pod restarts and retries, and its readiness holds the rollout
// on this node.
func (n *Installer) Run(ctx context.Context, mode Mode) (*Report, error) {
	var rep *Report
	var err error
	lk := &restartLock{lease: n.cfg.RestartLease}
	defer lk.done()
	switch mode {
	case ModeInstall:
		rep, err = n.install(ctx, lk)
	case ModeCleanup:
		rep, err = n.cleanup(ctx, lk)
	default:
		return nil, fmt.Errorf("mode %q: expected install or cleanup", mode)
	}
	if err != nil {
		return rep, err
	}
	n.setReady()
	return rep, nil
}
