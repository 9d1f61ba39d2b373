package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/facts"
)

// kubeletDefaultTimeout is the kubelet's runtimeRequestTimeout when nothing
// sets it: the KubeletConfiguration v1beta1 default (2m), which also
// replaces an explicit 0 in a configuration file (kubeadm writes
// "runtimeRequestTimeout: 0s" and relies on that). It is
// facts.KubeletDefaultRuntimeRequestTimeout as a duration.
const kubeletDefaultTimeout = 2 * time.Minute

// kubeletFileLimit bounds each kubelet file that is parsed: real ones are a
// few KiB, and the YAML decoder's cost grows with its input.
const kubeletFileLimit = 256 << 10

// kubeletProcLimit bounds the processes looked at to find the kubelet.
const kubeletProcLimit = 8192

const (
	timeoutFlag  = "runtime-request-timeout"
	timeoutKey   = "runtimeRequestTimeout"
	timeoutField = "kubelet.runtimeRequestTimeout"
)

// Where the distributions keep the kubelet's flags and configuration,
// relative to the root. Each list is in the order the kubelet sees them:
// a later flag overrides an earlier one.
var (
	// kubeletFlagFiles carry kubelet flags on kubeadm-style nodes (also
	// OpenShift's and AKS's units): the unit's ExecStart, its drop-ins'
	// Environment lines, kubeadm's generated flags and the packages'
	// KUBELET_EXTRA_ARGS (which 10-kubeadm.conf puts last).
	kubeletFlagFiles = []string{
		"usr/lib/systemd/system/kubelet.service", "lib/systemd/system/kubelet.service",
		"etc/systemd/system/kubelet.service",
		"var/lib/kubelet/kubeadm-flags.env", "etc/sysconfig/kubelet", "etc/default/kubelet",
	}
	// kubeletDropInDirs hold the systemd drop-ins of the kubelet unit.
	kubeletDropInDirs = []string{"usr/lib/systemd/system/kubelet.service.d", "etc/systemd/system/kubelet.service.d"}
	// k0sUnits are k0s's units; their ExecStart carries --profile and
	// --kubelet-extra-args.
	k0sUnits = []string{"etc/systemd/system/k0sworker.service", "etc/systemd/system/k0scontroller.service"}
)

// kubeadmConfig is the KubeletConfiguration kubeadm writes and the kubelet
// reads when no --config says otherwise.
const kubeadmConfig = "var/lib/kubelet/config.yaml"

// timeoutSetting is one place that set the timeout.
type timeoutSetting struct {
	d     time.Duration
	where string
}

// kubeletRead collects, for one discovery, where the kubelet's timeout is
// set and what stood in the way.
type kubeletRead struct {
	s *session
	// flag is the last --runtime-request-timeout seen, conf the value from
	// the configuration file, dropIn from its drop-in directory.
	flag, conf, dropIn *timeoutSetting
	// configPath and configDir are the kubelet's --config and --config-dir.
	configPath, configDir string
	// cmdline is set when the running kubelet's command line was read: its
	// flags are then the truth and the files that feed them are not read.
	cmdline bool
	// read lists the files read that did not set the timeout; problem is
	// the first reason a file that could have set it was not understood.
	read    []string
	problem string
}

// kubeletFacts discovers the kubelet's runtimeRequestTimeout and where it
// came from on the detected distribution. It never fails discovery: what
// cannot be read is recorded under kubelet.runtimeRequestTimeout.
func kubeletFacts(s *session, distribution string) facts.Kubelet {
	r := &kubeletRead{s: s}
	// k3s, RKE2 and MicroK8s run the kubelet inside their own binary: no
	// process of theirs is named kubelet, and the scan (a read per
	// process, some 15 µs each) is skipped there.
	if distribution != "k3s" && distribution != "rke2" && distribution != "microk8s" {
		r.processFlags()
	}
	switch distribution {
	case "k3s", "rke2":
		r.rancherArgs(distribution)
		r.readDropIns("var/lib/rancher/" + distribution + "/agent/etc/kubelet.conf.d")
	case "microk8s":
		r.flagsFromFile("var/snap/microk8s/current/args/kubelet")
		r.readConfig("")
	case "k0s":
		r.k0s()
	case "openshift":
		r.systemdFlags()
		r.readConfig("etc/kubernetes/kubelet.conf")
	default:
		r.systemdFlags()
		r.readConfig(kubeadmConfig)
	}
	if r.configDir != "" && distribution != "k3s" && distribution != "rke2" {
		r.readDropIns(strings.TrimPrefix(path.Clean("/"+r.configDir), "/"))
	}
	return r.result(distribution)
}

// result picks the setting the kubelet runs with: a flag over the
// configuration drop-ins over the configuration file over the default. A
// file that could not be understood leaves the timeout unknown unless a
// flag, which beats every file, set it. The default leaves the section
// empty (facts stay small on the common node).
func (r *kubeletRead) result(distribution string) facts.Kubelet {
	got := r.flag
	switch {
	case got == nil && r.problem != "":
		r.s.unknownf(timeoutField, "%s", r.problem)
		return facts.Kubelet{}
	case got == nil && r.dropIn != nil:
		got = r.dropIn
	case got == nil:
		got = r.conf
	}
	if got != nil {
		return facts.Kubelet{RuntimeRequestTimeout: got.d.String(), RuntimeRequestTimeoutSource: got.where}
	}
	if distribution == "" && !r.cmdline && len(r.read) == 0 {
		r.s.unknownf(timeoutField, "%s: no kubelet found (no Kubernetes distribution, no running kubelet, no %s)", facts.ReasonMissing, kubeadmConfig)
	}
	return facts.Kubelet{}
}

// noteProblem keeps the first reason a relevant file was not understood.
func (r *kubeletRead) noteProblem(reason string) {
	if r.problem == "" {
		r.problem = reason
	}
}

// read reads p quietly when it is missing; any other failure (permission,
// not a regular file, too large) is a problem: the file may set the
// timeout.
func (r *kubeletRead) readFile(p string) ([]byte, bool) {
	b, err := r.s.root.FS().ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false
	case err != nil:
		r.noteProblem(ReadReason(p, err))
		return nil, false
	case len(b) > kubeletFileLimit:
		r.noteProblem(fmt.Sprintf("larger than %d bytes: %s", kubeletFileLimit, p))
		return nil, false
	}
	return b, true
}

// processFlags finds the running kubelet and takes its flags from its
// command line: the first one by process id when several run (a test node
// beside the real one).
func (r *kubeletRead) processFlags() {
	procs := kubeletProcs(r.s)
	if len(procs) == 0 {
		return
	}
	r.cmdline = true
	r.applyFlags(procs[0].cmdline, 0, scanFlags(procs[0].args))
}

// kubeletProc is one running kubelet: its command line's path in the root
// and its arguments.
type kubeletProc struct {
	cmdline string
	args    []string
}

// kubeletProcs lists the running kubelets in process id order: processes
// named kubelet (kubeadm, k0s, OpenShift, AKS; k3s, RKE2 and MicroK8s run
// the kubelet inside their own binary). It looks at no more than
// kubeletProcLimit processes; a root without proc has none.
func kubeletProcs(s *session) []kubeletProc {
	ents, err := s.root.FS().ReadDir("proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 && e.IsDir() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	var out []kubeletProc
	for i, pid := range pids {
		if i >= kubeletProcLimit {
			break
		}
		dir := "proc/" + strconv.Itoa(pid)
		comm, err := s.root.FS().ReadFile(dir + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		b, err := s.root.FS().ReadFile(dir + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out = append(out, kubeletProc{cmdline: dir + "/cmdline", args: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")})
	}
	return out
}

// systemdFlags reads the kubelet flags the unit and its environment files
// pass, unless the running kubelet's command line was read.
func (r *kubeletRead) systemdFlags() {
	if r.cmdline {
		return
	}
	files := slices.Clone(kubeletFlagFiles[:3])
	for _, d := range kubeletDropInDirs {
		files = append(files, r.dirFiles(d, ".conf")...)
	}
	files = append(files, kubeletFlagFiles[3:]...)
	for _, p := range files {
		r.flagsFromFile(p)
	}
}

// dirFiles lists the files of dir with suffix, sorted (the order systemd
// and the kubelet apply drop-ins in); a missing dir has none.
func (r *kubeletRead) dirFiles(dir, suffix string) []string {
	ents, err := r.s.root.FS().ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.noteProblem(ReadReason(dir, err))
		}
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) && !e.IsDir() {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

// flagsFromFile applies the kubelet flags written in a unit, environment
// or arguments file, line by line, and returns every flag it found (k0s's
// unit also names the worker profile).
func (r *kubeletRead) flagsFromFile(p string) []kubeletFlag {
	b, ok := r.readFile(p)
	if !ok {
		return nil
	}
	before := r.flag
	var all []kubeletFlag
	for i, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		fl := scanFlags(shellWords(line))
		r.applyFlags(p, i+1, fl)
		all = append(all, fl...)
	}
	if r.flag == before {
		r.read = append(r.read, p)
	}
	return all
}

// applyFlags takes the timeout, --config and --config-dir from flags found
// at p (line 0: a command line).
func (r *kubeletRead) applyFlags(p string, line int, flags []kubeletFlag) {
	where := p
	if line > 0 {
		where = p + ":" + strconv.Itoa(line)
	}
	for _, f := range flags {
		switch f.name {
		case timeoutFlag:
			d, err := parseTimeout(f.value)
			if err != nil {
				r.noteProblem(unparseable(p, line, fmt.Sprintf("--%s=%q: want a duration such as 10m or 600s", timeoutFlag, f.value)))
				continue
			}
			r.flag = &timeoutSetting{d: d, where: where + " --" + timeoutFlag}
		case "config":
			r.configPath = f.value
		case "config-dir":
			r.configDir = f.value
		}
	}
}

// parseTimeout parses a duration as the kubelet does (Go's syntax: "10m",
// "600s", "1h30m"); a negative one is refused, as the kubelet's validation
// refuses it.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	return d, err
}

// kubeletFlag is one --name=value found in text.
type kubeletFlag struct{ name, value string }

// scanFlags finds the kubelet flags among words: "--name=value",
// "--name value", and flags nested in another flag's value
// ("--kubelet-extra-args=--runtime-request-timeout=10m", k0s).
func scanFlags(words []string) []kubeletFlag {
	var out []kubeletFlag
	for i, w := range words {
		for start := 0; start < len(w); {
			j := strings.Index(w[start:], "--")
			if j < 0 {
				break
			}
			j += start
			start = j + 2
			if j > 0 && w[j-1] != '=' {
				continue
			}
			rest := w[j+2:]
			name, value, hasValue := strings.Cut(rest, "=")
			if name == "" || strings.HasPrefix(name, "-") {
				continue
			}
			if !hasValue && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				value = words[i+1]
			}
			out = append(out, kubeletFlag{name: name, value: value})
		}
	}
	return out
}

// shellWords splits a unit or environment-file line into words, taking
// quotes, "\" continuations and "KEY=" assignments apart: the flags are
// what matters, not the variables that carry them.
func shellWords(line string) []string {
	return strings.FieldsFunc(line, func(c rune) bool {
		return c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '\\' || c == '\r'
	})
}

// readConfig reads the KubeletConfiguration at --config, or def when the
// kubelet has no --config ("" for none).
func (r *kubeletRead) readConfig(def string) {
	p := def
	if r.configPath != "" {
		p = strings.TrimPrefix(path.Clean("/"+r.configPath), "/")
	}
	if p == "" {
		return
	}
	if t, ok := r.configFile(p); ok {
		r.conf = t
	}
}

// readDropIns reads the kubelet's configuration drop-in directory
// (--config-dir, files ending in .conf, applied in name order).
func (r *kubeletRead) readDropIns(dir string) {
	for _, p := range r.dirFiles(dir, ".conf") {
		if t, ok := r.configFile(p); ok {
			r.dropIn = t
		}
	}
}

// configFile reads one KubeletConfiguration (YAML or JSON) and returns its
// runtimeRequestTimeout when it sets one.
func (r *kubeletRead) configFile(p string) (*timeoutSetting, bool) {
	b, ok := r.readFile(p)
	if !ok {
		return nil, false
	}
	t, err := parseKubeletConfig(p, b)
	if err != nil {
		r.noteProblem(err.Error())
		return nil, false
	}
	if t == nil {
		r.read = append(r.read, p)
		return nil, false
	}
	return t, true
}

// parseKubeletConfig returns the runtimeRequestTimeout of a
// KubeletConfiguration document, nil when it sets none (or is another
// kind of document, such as a kubeconfig at etc/kubernetes/kubelet.conf).
// An explicit zero is the default, as the kubelet's defaulting makes it.
func parseKubeletConfig(p string, b []byte) (*timeoutSetting, error) {
	var doc struct {
		Kind    string `json:"kind"`
		Timeout any    `json:"runtimeRequestTimeout"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, errors.New(unparseable(p, 0, "not a KubeletConfiguration: "+err.Error()))
	}
	if doc.Kind != "" && doc.Kind != "KubeletConfiguration" || doc.Timeout == nil {
		return nil, nil
	}
	line := keyLine(b, timeoutKey)
	v, ok := doc.Timeout.(string)
	if !ok {
		return nil, errors.New(unparseable(p, line, fmt.Sprintf("%s: %v is not a duration string such as \"10m\"", timeoutKey, doc.Timeout)))
	}
	d, err := parseTimeout(v)
	if err != nil {
		return nil, errors.New(unparseable(p, line, fmt.Sprintf("%s: %q: want a duration such as 10m or 600s", timeoutKey, v)))
	}
	where := p + ":" + strconv.Itoa(line) + " " + timeoutKey
	if d == 0 {
		return &timeoutSetting{d: kubeletDefaultTimeout, where: where + " " + v + " (zero: the default applies)"}, nil
	}
	return &timeoutSetting{d: d, where: where}, nil
}

// keyLine returns the 1-based line on which key is first set in a YAML or
// JSON document, 0 when not found.
func keyLine(b []byte, key string) int {
	for i, line := range strings.Split(string(b), "\n") {
		t := strings.TrimLeft(line, " \t-{,")
		t = strings.TrimPrefix(t, `"`)
		if rest, ok := strings.CutPrefix(t, key); ok {
			rest = strings.TrimLeft(strings.TrimPrefix(rest, `"`), " \t")
			if strings.HasPrefix(rest, ":") {
				return i + 1
			}
		}
	}
	return 0
}

// rancherArgs reads kubelet-arg from the k3s or RKE2 configuration file and
// its config.yaml.d drop-ins, merged as k3s does: a later file's
// kubelet-arg replaces the list, kubelet-arg+ appends to it; the last
// runtime-request-timeout of the list is the one the kubelet keeps.
func (r *kubeletRead) rancherArgs(dist string) {
	dir := "etc/rancher/" + dist
	files := append([]string{dir + "/config.yaml"}, r.dirFiles(dir+"/config.yaml.d", ".yaml")...)
	var args []rancherArg
	for _, p := range files {
		b, ok := r.readFile(p)
		if !ok {
			continue
		}
		got, replace, err := parseRancherArgs(p, b)
		if err != nil {
			r.noteProblem(err.Error())
			continue
		}
		if replace {
			args = nil
		}
		args = append(args, got...)
		r.read = append(r.read, p)
	}
	// k3s's command line (the unit's ExecStart, as the install script
	// writes INSTALL_K3S_EXEC) takes precedence over the files, and its
	// --kubelet-arg flags replace the files' list.
	if cli := r.rancherUnitArgs(dist); len(cli) > 0 {
		args = cli
	}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimLeft(a.arg, "-"), "=")
		if name != timeoutFlag {
			continue
		}
		d, err := parseTimeout(value)
		if err != nil {
			r.noteProblem(unparseable(a.file, a.line, fmt.Sprintf("%s %q: want %s=<duration> such as 10m", a.key, a.arg, timeoutFlag)))
			continue
		}
		r.flag = &timeoutSetting{d: d, where: fmt.Sprintf("%s:%d %s %s", a.file, a.line, a.key, timeoutFlag)}
	}
}

// rancherUnits are the k3s and RKE2 units whose ExecStart may carry
// --kubelet-arg.
func rancherUnits(dist string) []string {
	if dist == "k3s" {
		return []string{"etc/systemd/system/k3s.service", "etc/systemd/system/k3s-agent.service"}
	}
	return []string{"usr/local/lib/systemd/system/rke2-server.service", "usr/local/lib/systemd/system/rke2-agent.service",
		"usr/lib/systemd/system/rke2-server.service", "usr/lib/systemd/system/rke2-agent.service"}
}

// rancherUnitArgs returns the --kubelet-arg values of the distribution's
// units' ExecStart, whose arguments continue over lines ending in "\".
func (r *kubeletRead) rancherUnitArgs(dist string) []rancherArg {
	var out []rancherArg
	for _, p := range rancherUnits(dist) {
		b, ok := r.readFile(p)
		if !ok {
			continue
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			words := shellWords(lines[i])
			for j, w := range words {
				if w != "--kubelet-arg" && !strings.HasPrefix(w, "--kubelet-arg=") {
					continue
				}
				if v, ok := strings.CutPrefix(w, "--kubelet-arg="); ok {
					out = append(out, rancherArg{arg: v, file: p, line: i + 1, key: "--kubelet-arg"})
					continue
				}
				// The value is the next word, on this line or the next
				// one after a continuation.
				if j+1 < len(words) {
					out = append(out, rancherArg{arg: words[j+1], file: p, line: i + 1, key: "--kubelet-arg"})
				} else if i+1 < len(lines) {
					if next := shellWords(lines[i+1]); len(next) > 0 {
						out = append(out, rancherArg{arg: next[0], file: p, line: i + 2, key: "--kubelet-arg"})
					}
				}
			}
		}
	}
	return out
}

// rancherArg is one kubelet-arg entry and where it was written.
type rancherArg struct {
	arg, file string
	line      int
	// key is what set it: kubelet-arg, kubelet-arg+ or --kubelet-arg.
	key string
}

// parseRancherArgs returns the kubelet-arg entries of one k3s/RKE2
// configuration file, and whether they replace the list so far
// (kubelet-arg) rather than append to it (kubelet-arg+). The value is a
// list of "name=value" strings or a single one.
func parseRancherArgs(p string, b []byte) ([]rancherArg, bool, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, false, errors.New(unparseable(p, 0, err.Error()))
	}
	var out []rancherArg
	replace := false
	for _, key := range []string{"kubelet-arg", "kubelet-arg+"} {
		v, ok := doc[key]
		if !ok {
			continue
		}
		replace = replace || key == "kubelet-arg"
		var list []any
		switch v := v.(type) {
		case string:
			list = []any{v}
		case []any:
			list = v
		case nil:
		default:
			return nil, false, errors.New(unparseable(p, keyLine(b, key), key+": want a list of name=value strings"))
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, false, errors.New(unparseable(p, keyLine(b, key), fmt.Sprintf("%s: entry %v is not a name=value string", key, e)))
			}
			out = append(out, rancherArg{arg: s, file: p, line: valueLine(b, s, keyLine(b, key)), key: key})
		}
	}
	return out, replace, nil
}

// valueLine returns the first line at or after from (1-based) that
// contains s, or from when none does.
func valueLine(b []byte, s string, from int) int {
	lines := strings.Split(string(b), "\n")
	for i := max(from-1, 0); i < len(lines); i++ {
		if strings.Contains(lines[i], s) {
			return i + 1
		}
	}
	return from
}

// k0s reads the k0s worker's kubelet: the running kubelet's command line
// when there is one; otherwise --kubelet-extra-args and --profile from the
// k0s units and the profile's values in etc/k0s/k0s.yaml (workerProfiles,
// KubeletConfiguration fields).
func (r *kubeletRead) k0s() {
	if r.cmdline {
		r.readConfig("")
		return
	}
	profile := "default"
	for _, p := range k0sUnits {
		for _, f := range r.flagsFromFile(p) {
			if f.name == "profile" && f.value != "" {
				profile = f.value
			}
		}
	}
	const cfg = "etc/k0s/k0s.yaml"
	b, ok := r.readFile(cfg)
	if !ok {
		return
	}
	t, err := parseK0sProfile(cfg, b, profile)
	switch {
	case err != nil:
		r.noteProblem(err.Error())
	case t == nil:
		r.read = append(r.read, cfg)
	default:
		r.conf = t
	}
}

// parseK0sProfile returns the runtimeRequestTimeout that the named worker
// profile of a k0s ClusterConfig sets, nil when it sets none.
func parseK0sProfile(p string, b []byte, profile string) (*timeoutSetting, error) {
	var doc struct {
		Spec struct {
			WorkerProfiles []struct {
				Name   string         `json:"name"`
				Values map[string]any `json:"values"`
			} `json:"workerProfiles"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, errors.New(unparseable(p, 0, "not a k0s ClusterConfig: "+err.Error()))
	}
	for _, wp := range doc.Spec.WorkerProfiles {
		v, ok := wp.Values[timeoutKey]
		if wp.Name != profile || !ok {
			continue
		}
		line := valueLine(b, "name: "+profile, 0)
		line = max(line, 1)
		if l := valueLine(b, timeoutKey, line); l > 0 {
			line = l
		}
		s, ok := v.(string)
		d, err := parseTimeout(s)
		if !ok || err != nil {
			return nil, errors.New(unparseable(p, line, fmt.Sprintf("workerProfiles[%s].values.%s: %v: want a duration such as 10m", profile, timeoutKey, v)))
		}
		if d == 0 {
			d = kubeletDefaultTimeout
		}
		return &timeoutSetting{d: d, where: fmt.Sprintf("%s:%d workerProfiles[%s].values.%s", p, line, profile, timeoutKey)}, nil
	}
	return nil, nil
}
