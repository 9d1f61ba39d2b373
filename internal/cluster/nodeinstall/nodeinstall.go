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
package nodeinstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
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
	// StartupTaint, when set, is removed from the Node after a run in
	// which every platform's handler is verified live, and kept after any
	// other (nil: none).
	StartupTaint *StartupTaint
	// AdvertiseTEEKeys advertises, in the Node's status.capacity, the
	// number of keys of each TEE an installed platform uses
	// (ResourceSNPKeys, ResourceTDXKeys), where the host's facts give it;
	// without it, any the installer advertised before are removed.
	AdvertiseTEEKeys bool
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

// layout is the runtime layout p is configured in.
func (n *Installer) layout(p platform.Platform) (platform.Layout, error) {
	if p.Distribution().UserLayout() {
		return *n.cfg.Custom, nil
	}
	l, ok := p.Distribution().Layout()
	if !ok {
		return platform.Layout{}, fmt.Errorf("platform %s: berth does not know where %s keeps its container runtime; use the custom distribution with its config file and unit", p, p.Distribution())
	}
	return l, nil
}

// countingRuntime counts the restarts of a runtime, for the report, and
// takes the cluster's restart lock before the first.
type countingRuntime struct {
	configure.Runtime
	n    *int
	lock *restartLock
}

// services is the wrapped runtime's configure.Services (berth's
// nydus-snapshotter unit), or an error saying it has none.
func (c countingRuntime) services() (configure.Services, error) {
	sv, ok := c.Runtime.(configure.Services)
	if !ok {
		return nil, fmt.Errorf("%s cannot start or stop services", c.Name())
	}
	return sv, nil
}

// StartServices starts the wrapped runtime's services: not a restart of
// the runtime, so no lock and no count.
func (c countingRuntime) StartServices(ctx context.Context, units []string, restart bool) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.StartServices(ctx, units, restart)
}

// StopServices stops the wrapped runtime's services.
func (c countingRuntime) StopServices(ctx context.Context, units []string) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.StopServices(ctx, units)
}

// ServiceActive reports whether unit runs.
func (c countingRuntime) ServiceActive(ctx context.Context, unit string) bool {
	sv, err := c.services()
	return err == nil && sv.ServiceActive(ctx, unit)
}

// ServiceLog is unit's log.
func (c countingRuntime) ServiceLog(ctx context.Context, unit string) string {
	if sv, err := c.services(); err == nil {
		return sv.ServiceLog(ctx, unit)
	}
	return ""
}

// LoadConfig loads the wrapped runtime's configuration before a restart
// (configure.ConfigLoader); nil when it cannot.
func (c countingRuntime) LoadConfig(ctx context.Context) (string, error) {
	if cl, ok := c.Runtime.(configure.ConfigLoader); ok {
		return cl.LoadConfig(ctx)
	}
	return "", nil
}

// ProveSnapshotter proves a snapshotter through the wrapped runtime.
func (c countingRuntime) ProveSnapshotter(ctx context.Context, name string) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.ProveSnapshotter(ctx, name)
}

func (c countingRuntime) Restart(ctx context.Context) error {
	if err := c.lock.take(ctx); err != nil {
		return fmt.Errorf("waiting for the cluster's restart lock: %w", err)
	}
	*c.n++
	return c.Runtime.Restart(ctx)
}

func (n *Installer) install(ctx context.Context, lk *restartLock) (*Report, error) {
	cfg := n.cfg
	rep := &Report{Mode: ModeInstall, Node: cfg.NodeName, Handlers: map[string][]string{}}
	if len(cfg.Platforms) == 0 {
		return rep, errors.New("node-installer: no --platform: berth never picks a platform for you")
	}
	if cfg.Manifest == nil || cfg.Fetcher == nil {
		return rep, errors.New("node-installer: install needs a manifest")
	}
	dopt := cfg.Discover
	dopt.Layout = cfg.Custom
	pre, err := preflight.Run(ctx, cfg.Root, preflight.Options{Discover: dopt, Check: cfg.Check, Platforms: cfg.Platforms})
	if err != nil {
		return rep, err
	}
	var ready []platform.Platform
	var notReady []check.Verdict
	for i, v := range pre.Verdicts {
		if v.Status == check.NotReady {
			notReady = append(notReady, v)
		} else {
			ready = append(ready, pre.Platforms[i])
		}
	}
	// The platforms berth installed here that the list no longer has,
	// from the node's own records: both must be readable before anything
	// is removed.
	dropped, err := n.dropped()
	if err != nil {
		return rep, err
	}
	if len(dropped) > 0 {
		if err := n.removeDropped(ctx, dropped, len(ready) > 0, rep, lk); err != nil {
			msg := fmt.Sprintf("berth could not remove %s, no longer in its platform list, from this node: %v", platformNames(dropped), err)
			if eerr := n.event(ctx, ReasonInstallFailed, "remove", msg); eerr != nil {
				cfg.Log.Error("writing the Event", "err", eerr)
			} else {
				rep.Events = append(rep.Events, ReasonInstallFailed)
			}
			return rep, err
		}
	}
	if len(ready) > 0 {
		failed := func(err error) (*Report, error) {
			msg := fmt.Sprintf("berth could not install %s on this node: %v", platformNames(ready), err)
			if eerr := n.event(ctx, ReasonInstallFailed, "install", msg); eerr != nil {
				cfg.Log.Error("writing the Event", "err", eerr)
			} else {
				rep.Events = append(rep.Events, ReasonInstallFailed)
			}
			// The record says which platforms failed and why; the labels
			// stay as the last successful run left them.
			st := n.installStatus(ready, err, notReady)
			if _, serr := n.applyNode(ctx, nil, &st); serr != nil {
				cfg.Log.Error("recording the install status", "err", serr)
			} else {
				rep.InstallStatus = &st
			}
			return rep, err
		}
		// The runtime of each platform first: nothing is written on a
		// node whose runtime cannot be restarted.
		runtimes, err := n.runtimes(ctx, ready, &rep.Restarts, lk)
		if err != nil {
			return failed(err)
		}
		n.useRunningVersion(ctx, pre.Facts, runtimes)
		if err := makePrefix(cfg.Writable, cfg.Prefix); err != nil {
			return failed(err)
		}
		if err := n.installReady(ctx, pre.Facts, ready, dropped, runtimes, rep); err != nil {
			return failed(err)
		}
	}
	for _, p := range dropped {
		rep.Platforms = append(rep.Platforms, PlatformResult{Platform: p.String(), Status: StatusRemoved})
	}
	want := map[string]string{}
	for _, p := range ready {
		r := PlatformResult{Platform: p.String(), Status: StatusInstalled}
		if key, ok := InstalledLabel(cfg.Suffix, p); ok {
			r.Label, want[key] = key, "true"
		} else {
			cfg.Log.Warn("platform name too long for a label: installed but not labelled", "platform", p.String())
		}
		rep.Platforms = append(rep.Platforms, r)
	}
	if cfg.KataDeployLabels && len(ready) > 0 {
		want[KataDeployLabel] = "true"
	}
	for _, v := range notReady {
		p, err := platform.Parse(v.Platform)
		if err != nil {
			return rep, fmt.Errorf("internal error: verdict for %q: %w", v.Platform, err)
		}
		r := notReadyResult(p, v)
		if key, ok := InstalledLabel(cfg.Suffix, p); ok {
			r.Label, want[key] = key, "no"
		}
		rep.Platforms = append(rep.Platforms, r)
	}
	rep.Labels = want
	st := n.installStatus(ready, nil, notReady)
	if rep.LabelsChanged, err = n.applyNode(ctx, want, &st); err != nil {
		return rep, err
	}
	rep.InstallStatus = &st
	rep.TEEKeys = n.teeKeys(pre.Facts, ready)
	if rep.TEEKeysChanged, err = n.applyTEEKeys(ctx, rep.TEEKeys); err != nil {
		return rep, err
	}
	// Every listed platform installed and its handler verified live: the
	// pods that need it may come.
	if len(notReady) == 0 && len(ready) > 0 {
		if rep.TaintRemoved, err = n.removeStartupTaint(ctx); err != nil {
			return rep, err
		}
	}
	for _, r := range rep.Platforms {
		if r.Status != StatusNotReady {
			continue
		}
		msg := fmt.Sprintf("platform %s is not ready on this node, so berth installed nothing for it: %s: %s", r.Platform, r.Blocker, r.Message)
		if r.Remedy != "" {
			msg += "; remedy: " + r.Remedy
		}
		if err := n.event(ctx, ReasonNotReady, r.Platform, msg); err != nil {
			return rep, err
		}
		rep.Events = append(rep.Events, ReasonNotReady)
		cfg.Log.Info("platform not ready: nothing installed", "platform", r.Platform, "check", r.Blocker)
	}
	return rep, nil
}

// installStatus is the record of a run: the ready platforms installed, or
// failed with failure when it is not nil, and the others not ready with
// their first failing check.
func (n *Installer) installStatus(ready []platform.Platform, failure error, notReady []check.Verdict) v1alpha1.InstallStatus {
	st := v1alpha1.InstallStatus{Time: metav1.NewTime(n.cfg.Now())}
	if m := n.cfg.Manifest; m != nil {
		st.Version, st.Digest = m.Version, m.Digest()
	}
	for _, p := range ready {
		pi := v1alpha1.PlatformInstall{Name: p.String(), Handler: n.cfg.Suffix.Handler(p), State: v1alpha1.InstallInstalled}
		if failure != nil {
			pi.State, pi.Error = v1alpha1.InstallFailed, failure.Error()
		}
		st.Platforms = append(st.Platforms, pi)
	}
	for _, v := range notReady {
		pi := v1alpha1.PlatformInstall{Name: v.Platform, State: v1alpha1.InstallNotReady}
		if p, err := platform.Parse(v.Platform); err == nil {
			pi.Name, pi.Handler = p.String(), n.cfg.Suffix.Handler(p)
			r := notReadyResult(p, v)
			pi.Error = r.Message
			if r.Blocker != "" {
				pi.Error = r.Blocker + ": " + r.Message
			}
		}
		st.Platforms = append(st.Platforms, pi)
	}
	return nodereport.NormalizeInstall(st)
}

// notReadyResult names the first failing check of a platform that is not
// ready: the root cause, in the catalogue's tree order.
func notReadyResult(p platform.Platform, v check.Verdict) PlatformResult {
	r := PlatformResult{Platform: p.String(), Status: StatusNotReady, Blocker: v.BlockedBy, Remedy: v.Remedy}
	for _, fd := range v.Findings {
		if fd.Status != check.Fail {
			continue
		}
		if r.Blocker == "" {
			r.Blocker = fd.ID
		}
		if fd.ID == r.Blocker {
			r.Message = fd.Message
			if r.Remedy == "" {
				r.Remedy = fd.Remedy
			}
			break
		}
	}
	return r
}

func platformNames(ps []platform.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return fmt.Sprint(s)
}

// runningRuntime is a runtime that can say which daemon answers on its
// socket (runtimectl.Runtime).
type runningRuntime interface {
	Running(ctx context.Context) (name, version string, err error)
}

// useRunningVersion makes the version of the containerd that answers on
// the node's socket the one the configuration is written for: discovery
// found a containerd binary on the PATH, which need not be the one the
// unit runs (a tarball install beside the distribution's package, say), and
// the config format follows the daemon the restart starts again.
func (n *Installer) useRunningVersion(ctx context.Context, f *facts.Facts, runtimes map[string]configure.Runtime) {
	c := f.Runtimes.Containerd
	if c == nil {
		return
	}
	for _, rt := range runtimes {
		inner := rt
		if cr, ok := rt.(countingRuntime); ok {
			inner = cr.Runtime
		}
		rr, ok := inner.(runningRuntime)
		if !ok {
			continue
		}
		name, version, err := rr.Running(ctx)
		version = strings.TrimPrefix(version, "v")
		if err != nil || name != "containerd" || version == "" || version == c.Version {
			continue
		}
		n.cfg.Log.Info("containerd's version from the running daemon", "binary", c.Binary, "binaryVersion", c.Version, "running", version)
		c.Version = version
		return
	}
}

// runtimes finds the running container runtime of each platform, keyed
// by platform; restarts counts their restarts.
func (n *Installer) runtimes(ctx context.Context, ps []platform.Platform, restarts *int, lk *restartLock) (map[string]configure.Runtime, error) {
	out := map[string]configure.Runtime{}
	for _, p := range ps {
		l, err := n.layout(p)
		if err != nil {
			return nil, err
		}
		rt, err := n.cfg.Runtime(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("platform %s: finding the running container runtime: %w", p, err)
		}
		out[p.String()] = countingRuntime{Runtime: rt, n: restarts, lock: lk}
	}
	return out, nil
}

// installReady installs the ready platforms with berth install's
// workflow: the components are installed, each platform's configuration
// applied with a restart of its runtime and a check over CRI (rolled back
// if a handler is lost), and every handler verified live.
func (n *Installer) installReady(ctx context.Context, f *facts.Facts, ready, dropped []platform.Platform, runtimes map[string]configure.Runtime, rep *Report) error {
	cfg := n.cfg
	w := cfg.Writable
	wf := &install.Workflow{
		Installer: &install.Installer{
			Layout:   install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix},
			Fetcher:  cfg.Fetcher,
			Parallel: cfg.Parallel,
			Log:      cfg.Log,
			Drop:     dropped,
		},
		Applier: install.RuntimeConfig{
			FS:      w,
			Options: configure.Options{Paths: cfg.Install.Paths("")},
			Target: func(p platform.Platform) (configure.Target, error) {
				if p.Distribution().UserLayout() {
					return configure.TargetForLayout(f, p, *cfg.Custom, cfg.ConfigVersion)
				}
				return configure.TargetFor(f, p, cfg.ConfigVersion)
			},
			Runtime: func(_ context.Context, p platform.Platform) (configure.Runtime, bool) {
				rt, ok := runtimes[p.String()]
				return rt, ok
			},
		},
		Verifier: criVerifier{suffix: cfg.Suffix, runtimes: runtimes, handlers: rep.Handlers, facts: f, sandbox: cfg.Sandbox, layout: n.layout, log: cfg.Log},
	}
	pl, err := wf.Plan(cfg.Manifest, ready)
	if err != nil {
		return err
	}
	out, err := wf.Run(ctx, pl)
	if out != nil {
		if out.Install != nil {
			rep.Installed = out.Install.Changed
		}
		for _, a := range out.Applied {
			rep.Changed = append(rep.Changed, a.Changed...)
		}
	}
	if err != nil {
		return withVerifyErrors(err, out)
	}
	if len(dropped) > 0 {
		// Verified: the previous installation, which still serves the
		// dropped platforms, is no longer a rollback target.
		rm, err := wf.Installer.PrunePrevious(ctx)
		if rm != nil {
			n.removed(rm, rep)
		}
		if err != nil {
			return fmt.Errorf("removing the files of %s: %w", platformNames(dropped), err)
		}
	}
	cfg.Log.Info("installed", "platforms", platformNames(ready), "id", pl.ID, "changed", rep.Installed, "config", len(rep.Changed), "restarts", rep.Restarts)
	return nil
}

// removed adds what an uninstall or prune removed and kept to rep.
func (n *Installer) removed(rm *install.Removal, rep *Report) {
	rep.Removed = append(rep.Removed, rm.Removed...)
	rep.Kept = append(rep.Kept, rm.Kept...)
	for _, k := range rm.Kept {
		n.cfg.Log.Warn("left in place", "path", k.Path, "why", k.Why)
	}
}

// dropped are the platforms the prefix's installations serve (current
// and previous, as cleanup removes them) that the platform list no longer
// has. The install record and configure's state are the node's own
// records, unlike labels, which anyone may edit: when either cannot be
// read, the run stops before it removes anything. A platform berth's
// installation does not serve (one configured by hand, say) is never
// dropped.
func (n *Installer) dropped() ([]platform.Platform, error) {
	st, err := install.Layout{Root: n.cfg.Writable, Prefix: n.cfg.Prefix}.Status()
	if err != nil {
		return nil, fmt.Errorf("reading the installation record under %s, so removing nothing: %w", n.cfg.Prefix, err)
	}
	w := n.cfg.Writable
	if _, err := configure.LoadState(w); err != nil {
		return nil, fmt.Errorf("reading berth's runtime configuration state, so removing nothing: %w", err)
	}
	var out []platform.Platform
	for _, s := range st.Platforms() {
		p, err := platform.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("the installation record names platform %q, so removing nothing: %w", s, err)
		}
		if !slices.ContainsFunc(n.cfg.Platforms, func(q platform.Platform) bool { return q.String() == p.String() }) {
			out = append(out, p)
		}
	}
	return out, nil
}

// removeDropped removes the runtime configuration of the dropped
// platforms, each with a restart that proves every other handler still
// live and rolls back otherwise (removeConfig, as cleanup does). Their
// files go with the install of the list's ready platforms (installing,
// true), which does not carry them into the new installation; when the
// installation serves nothing else, everything berth installed under the
// prefix is removed now, as cleanup does. A listed platform that is not
// ready keeps its files and configuration: its pods may be running.
func (n *Installer) removeDropped(ctx context.Context, dropped []platform.Platform, installing bool, rep *Report, lk *restartLock) error {
	cfg := n.cfg
	names := make([]string, len(dropped))
	for i, p := range dropped {
		names[i] = p.String()
	}
	cfg.Log.Info("removing platforms no longer in the list", "platforms", fmt.Sprint(names))
	if err := n.removeConfig(ctx, names, rep, lk); err != nil {
		return err
	}
	if installing {
		return nil
	}
	l := install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix}
	st, err := l.Status()
	if err != nil {
		return err
	}
	for _, s := range st.Platforms() {
		if !slices.Contains(names, s) {
			cfg.Log.Info("the dropped platforms' files stay until a run installs the list's platforms", "platforms", fmt.Sprint(names))
			return nil
		}
	}
	rm, err := (&install.Installer{Layout: l, Log: cfg.Log}).Uninstall(ctx)
	if rm != nil {
		n.removed(rm, rep)
	}
	if err != nil {
		return fmt.Errorf("removing what berth installed under %s: %w", cfg.Prefix, err)
	}
	return nil
}

// withVerifyErrors adds to err what each failed verification said (a
// sandbox's runtime text, say), so that the Node's Event carries it.
func withVerifyErrors(err error, out *install.Outcome) error {
	if out == nil {
		return err
	}
	var why []string
	for _, v := range out.Verified {
		if v.Error != "" {
			why = append(why, v.Handler+": "+v.Error)
		}
	}
	if len(why) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(why, "; "))
}

// criVerifier is the workflow's verifier: it asks the runtime over CRI,
// as ApplyLive did after a restart; a run that changed nothing still
// proves the handlers live.
type criVerifier struct {
	suffix   configure.Suffix
	runtimes map[string]configure.Runtime
	handlers map[string][]string
	facts    *facts.Facts
	sandbox  *SandboxCheck
	layout   func(platform.Platform) (platform.Layout, error)
	log      *slog.Logger
}

// SandboxCheck is how the installer reaches the runtime to prove a
// handler with a pod sandbox.
type SandboxCheck struct {
	// Socket is a layout's CRI socket (inside the host's root).
	Socket func(l platform.Layout) cri.Endpoint
	// Timeout bounds the sandbox's start (0: 2 min).
	Timeout time.Duration
}

// prove starts a sandbox of p's handler unless the host's facts say its
// VM cannot run here; a failure makes res not live.
func (v criVerifier) prove(ctx context.Context, p platform.Platform, res *configure.Verification) error {
	l, err := v.layout(p)
	if err != nil {
		return err
	}
	sock := v.sandbox.Socket(l)
	typ := ""
	if st, err := sock.Query(ctx, 10*time.Second); err == nil {
		typ = st.Handlers[v.suffix.Handler(p)].RuntimeType
	}
	if reason := cri.SkipReason(p, typ, v.facts); reason != "" {
		res.Sandbox, res.SandboxReason = string(cri.SandboxSkip), reason
		v.log.Warn("SKIP: the handler's sandbox was not started, so not proven", "platform", p.String(), "handler", v.suffix.Handler(p), "reason", reason)
		return nil
	}
	timeout := v.sandbox.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	// No log directory: the sandbox has no containers, and a path in
	// this pod would not be the host's.
	sb, err := sock.ProveSandbox(ctx, v.suffix.Handler(p), "", timeout)
	if err != nil {
		sb.Outcome, sb.Error = cri.SandboxFail, err.Error()
	}
	res.Sandbox = string(sb.Outcome)
	if sb.Outcome == cri.SandboxFail {
		res.Live, res.Error = false, "the handler is loaded but a pod sandbox with it failed: "+sb.Error
		v.log.Error("a pod sandbox with the handler failed", "platform", p.String(), "handler", v.suffix.Handler(p), "error", sb.Error)
		return nil
	}
	v.log.Info("a pod sandbox with the handler started and was removed", "platform", p.String(), "handler", v.suffix.Handler(p), "seconds", sb.Duration)
	return nil
}

func (v criVerifier) Verify(ctx context.Context, p platform.Platform) (configure.Verification, error) {
	rt := v.runtimes[p.String()]
	res := configure.Verification{Platform: p.String(), Handler: v.suffix.Handler(p), Runtime: rt.Name()}
	hs, err := rt.Handlers(ctx)
	if err != nil {
		res.Runtime, res.Error = "", err.Error()
		return res, nil
	}
	res.Handlers, res.Live = hs, slices.Contains(hs, res.Handler)
	v.handlers[rt.Name()] = hs
	if res.Live && v.sandbox != nil {
		if err := v.prove(ctx, p, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (n *Installer) cleanup(ctx context.Context, lk *restartLock) (*Report, error) {
	cfg := n.cfg
	rep := &Report{Mode: ModeCleanup, Node: cfg.NodeName, Handlers: map[string][]string{}}
	l := install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix}
	// Status resolves the prefix inside the root: a prefix leaving it is
	// refused before anything is removed.
	st, err := l.Status()
	if err != nil {
		return rep, err
	}
	plats := st.Platforms()
	if err := n.removeConfig(ctx, plats, rep, lk); err != nil {
		return rep, err
	}
	created, err := createdDirs(cfg.Writable, cfg.Prefix)
	if err != nil {
		return rep, err
	}
	rm, err := (&install.Installer{Layout: l, Log: cfg.Log}).Uninstall(ctx)
	if err != nil {
		return rep, fmt.Errorf("removing what berth installed under %s: %w", cfg.Prefix, err)
	}
	rep.Removed, rep.Kept = rm.Removed, rm.Kept
	for _, k := range rm.Kept {
		cfg.Log.Warn("left in place", "path", k.Path, "why", k.Why)
	}
	for _, s := range plats {
		rep.Platforms = append(rep.Platforms, PlatformResult{Platform: s, Status: StatusRemoved})
	}
	if created != nil {
		removed, err := removeCreated(cfg.Writable, created)
		rep.Removed = append(rep.Removed, removed...)
		if err != nil {
			return rep, err
		}
	}
	// The TEE keys go before the labels: a node without installed labels
	// must advertise no keys for sandboxes it can no longer run.
	if rep.TEEKeysChanged, err = n.applyTEEKeys(ctx, nil); err != nil {
		return rep, err
	}
	rep.Labels = map[string]string{}
	if rep.LabelsChanged, err = n.applyNode(ctx, rep.Labels, nil); err != nil {
		return rep, err
	}
	cfg.Log.Info("cleaned up", "platforms", fmt.Sprint(plats), "removed", len(rm.Removed), "kept", len(rm.Kept), "restarts", rep.Restarts)
	return rep, nil
}

// removeConfig removes the runtime configuration of the installed
// platforms, each with a restart and a check that every other handler is
// still live (configure.RemoveLive).
func (n *Installer) removeConfig(ctx context.Context, plats []string, rep *Report, lk *restartLock) error {
	if len(plats) == 0 {
		return nil
	}
	w := n.cfg.Writable
	st, err := configure.LoadState(w)
	if err != nil {
		return err
	}
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("the installation record names platform %q: %w", s, err)
		}
		ps, ok := st.Platforms[n.cfg.Suffix.Handler(p)]
		if !ok {
			continue
		}
		var l platform.Layout
		if ps.Layout != nil {
			// A custom distribution's paths, as given when it was applied.
			l = *ps.Layout
		} else if l, err = n.layout(p); err != nil {
			return err
		}
		rt, err := n.cfg.Runtime(ctx, l)
		if err != nil {
			return fmt.Errorf("platform %s: finding the running container runtime: %w", p, err)
		}
		res, err := configure.RemoveLive(ctx, w, n.cfg.Suffix.Handler(p), countingRuntime{Runtime: rt, n: &rep.Restarts, lock: lk})
		if res != nil && res.Result != nil {
			rep.Changed = append(rep.Changed, res.Changed...)
		}
		if err != nil {
			return fmt.Errorf("removing the runtime configuration of %s: %w", p, err)
		}
		if res.Restarted {
			rep.Handlers[rt.Name()] = res.After
		}
	}
	return nil
}

// createdFile, in the prefix, lists (as a JSON array, relative to the host
// root, outermost first) the prefix's parent directories the installer
// created because they did not exist: cleanup removes them, if empty, so
// that the host is left as it was. It lives in the prefix, which is
// berth's, since the installer may write nothing else on its Node than
// its labels.
const createdFile = ".node-installer-created-dirs"

// makePrefix creates the prefix when one of its parents is missing,
// recording the parents it creates in createdFile first thing, so that a
// cleanup after a failed install finds them. When the parents exist it
// does nothing: the installer creates the prefix itself and Uninstall
// removes it.
func makePrefix(host *hostfs.Writable, prefix string) error {
	rel, exists, err := install.ResolveIn(host, prefix)
	if err != nil || exists {
		return err
	}
	var missing []string
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		if _, err := host.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := host.MkdirAll(rel, 0o755); err != nil {
		return fmt.Errorf("creating the prefix %s: %w", prefix, err)
	}
	b, _ := json.Marshal(missing)
	if err := hostfs.WriteAtomic(host, path.Join(rel, createdFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the directories made for the prefix %s: %w", prefix, err)
	}
	return nil
}

// created is what createdDirs read: the prefix (relative to the host root)
// and the parents the installer made for it.
type created struct {
	prefix string
	dirs   []string
}

// createdDirs reads createdFile (nil when there is none). Only ancestors
// of the prefix are taken: the file is in a directory others may write.
func createdDirs(host *hostfs.Writable, prefix string) (*created, error) {
	rel, exists, err := install.ResolveIn(host, prefix)
	if err != nil || !exists {
		return nil, err
	}
	data, err := host.ReadFile(path.Join(rel, createdFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path.Join(prefix, createdFile), err)
	}
	var dirs []string
	if err := json.Unmarshal(data, &dirs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path.Join(prefix, createdFile), err)
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool {
		return path.Clean(d) != d || d == "." || !strings.HasPrefix(rel, d+"/")
	})
	return &created{prefix: rel, dirs: dirs}, nil
}

// removeCreated removes createdFile, then the prefix and the parents the
// installer made, deepest first, each only if it is empty (something else
// may have been put there since). It returns what it removed.
func removeCreated(host *hostfs.Writable, c *created) ([]string, error) {
	var removed []string
	rm := func(rel string) error {
		err := host.Remove(rel)
		switch {
		case err == nil:
			removed = append(removed, "/"+rel)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		default:
			return fmt.Errorf("removing /%s: %w", rel, err)
		}
		return nil
	}
	if err := rm(path.Join(c.prefix, createdFile)); err != nil {
		return removed, err
	}
	dirs := append(slices.Clone(c.dirs), c.prefix)
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := rm(d); err != nil {
			return removed, err
		}
	}
	return removed, nil
}
