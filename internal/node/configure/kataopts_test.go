package configure

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const qemuDropIn = "[hypervisor.qemu]\ndefault_memory = 4096\ndefault_vcpus = 2\nenable_annotations = [\"default_memory\"]\n\n[runtime]\nenable_debug = true\n"

// kataConfigOf decodes the rendered Kata configuration of r.
func kataConfigOf(t *testing.T, r *Rendered) map[string]any {
	t.Helper()
	var m map[string]any
	if err := toml.Unmarshal(r.Host[0].Content, &m); err != nil {
		t.Fatalf("%s: %v", r.Host[0].Path, err)
	}
	return m
}

func hypervisorOf(t *testing.T, m map[string]any, section string) map[string]any {
	t.Helper()
	hv, _ := m["hypervisor"].(map[string]any)[section].(map[string]any)
	if hv == nil {
		t.Fatalf("no [hypervisor.%s]", section)
	}
	return hv
}

// TestKataOptionsRender: the proxy lands in kernel_params as kata-deploy
// writes it (after the template's, before the debug variant's), the
// annotation allowlist is merged into enable_annotations sorted and
// without repeats, and options left empty change nothing.
func TestKataOptionsRender(t *testing.T) {
	p := mustParse(t, "kubeadm-qemu-snp")
	plain, err := Render(p, targetFor(t, "kubeadm", 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := hypervisorOf(t, kataConfigOf(t, plain), "qemu")
	o := KataOptions{HTTPSProxy: "http://proxy.example:3128", NoProxy: "localhost,.svc,10.0.0.0/8", Annotations: []string{"default_memory", "default_gpus", "image"}}
	r, err := Render(p, targetFor(t, "kubeadm", 3), Options{Kata: o})
	if err != nil {
		t.Fatal(err)
	}
	hv := hypervisorOf(t, kataConfigOf(t, r), "qemu")
	wantParams := base["kernel_params"].(string) + " agent.https_proxy=http://proxy.example:3128 agent.no_proxy=localhost,.svc,10.0.0.0/8"
	if hv["kernel_params"] != wantParams {
		t.Errorf("kernel_params = %q, want %q", hv["kernel_params"], wantParams)
	}
	var got []string
	for _, a := range hv["enable_annotations"].([]any) {
		got = append(got, a.(string))
	}
	want := "cc_init_data,default_gpus,default_memory,default_vcpus,enable_iommu,image,kernel_params,kernel_verity_params"
	if strings.Join(got, ",") != want {
		t.Errorf("enable_annotations = %v, want %s", got, want)
	}
	if r.Host[0].Path != plain.Host[0].Path || len(r.Host) != len(plain.Host) {
		t.Errorf("proxy and annotations moved or added files: %s, %d files", r.Host[0].Path, len(r.Host))
	}
	// The debug variant: the proxy, then the debug parameters.
	d, err := Render(mustParse(t, "kubeadm-qemu-snp+debug"), targetFor(t, "kubeadm", 3), Options{Kata: KataOptions{HTTPSProxy: "http://p:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if kp := hypervisorOf(t, kataConfigOf(t, d), "qemu")["kernel_params"].(string); !strings.HasSuffix(kp, " agent.https_proxy=http://p:1 agent.log=debug initcall_debug") {
		t.Errorf("debug kernel_params = %q", kp)
	}
}

// TestKataDropInRender: a drop-in moves the platform's Kata configuration
// into a directory of its own (Kata merges the config.d beside the file
// it reads) and is written there as 50-user-overrides.toml; the handler
// points at the moved file; a custom runtime gets its own names.
func TestKataDropInRender(t *testing.T) {
	p := mustParse(t, "kubeadm-qemu-none")
	r, err := Render(p, targetFor(t, "kubeadm", 3), Options{Kata: KataOptions{DropIn: []byte(qemuDropIn), DropInSource: "--kata-drop-in kubeadm-qemu-none=x.toml"}})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, f := range r.Host {
		paths[f.Path] = string(f.Content)
	}
	cfg := "opt/berth/etc/kata/runtimes/kubeadm-qemu-none/kubeadm-qemu-none.toml"
	drop := "opt/berth/etc/kata/runtimes/kubeadm-qemu-none/config.d/50-user-overrides.toml"
	if _, ok := paths[cfg]; !ok {
		t.Errorf("no Kata configuration at %s: %v", cfg, maps.Keys(paths))
	}
	if !strings.HasSuffix(paths[drop], qemuDropIn) || strings.Contains(paths[drop], "x.toml") {
		t.Errorf("drop-in %s:\n%s", drop, paths[drop])
	}
	if h := paths["etc/containerd/conf.d/berth-kata-qemu.toml"]; !strings.Contains(h, `ConfigPath = "/`+cfg+`"`) {
		t.Errorf("handler does not point at the moved configuration:\n%s", h)
	}

	c, err := Render(p, targetFor(t, "kubeadm", 3), Options{Paths: Paths{Custom: "kata-big"}, Kata: KataOptions{DropIn: []byte(qemuDropIn)}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Handler != "kata-big" || c.Host[0].Path != "opt/berth/etc/kata/runtimes/kata-big/kata-big.toml" ||
		c.Host[1].Path != "opt/berth/etc/kata/runtimes/kata-big/config.d/50-overrides.toml" {
		t.Errorf("custom runtime: handler %s, files %s, %s", c.Handler, c.Host[0].Path, c.Host[1].Path)
	}
	if rc := string(c.RuntimeClass); !strings.Contains(rc, "name: kata-big") || !strings.Contains(rc, "handler: kata-big") {
		t.Errorf("custom RuntimeClass:\n%s", rc)
	}
}

// TestKataOptionsRefused: bad input is refused before anything is read
// or written, naming what is wrong and what was expected, and the tree is
// byte for byte what it was.
func TestKataOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		custom string
		o      KataOptions
		want   []string
	}{
		{"unknown key", "", KataOptions{DropIn: []byte("[hypervisor.qemu]\ndefault_memroy = 4096\n"), DropInSource: "f.toml"},
			[]string{"f.toml, line 2", "hypervisor.qemu.default_memroy", "not a key"}},
		{"wrong type", "", KataOptions{DropIn: []byte("[hypervisor.qemu]\n\ndefault_memory = \"4G\"\n")},
			[]string{"line 3", "hypervisor.qemu.default_memory", "expected an integer, got a string"}},
		{"wrong array element", "", KataOptions{DropIn: []byte("[hypervisor.qemu]\nenable_annotations = [1]\n")},
			[]string{"hypervisor.qemu.enable_annotations", "expected an array of strings"}},
		{"another hypervisor's table", "", KataOptions{DropIn: []byte("[hypervisor.clh]\ndefault_memory = 1\n")},
			[]string{"table [hypervisor.clh]", "[hypervisor.qemu]"}},
		{"not TOML", "", KataOptions{DropIn: []byte("[hypervisor.qemu\n")}, []string{"line 1", "expected TOML"}},
		{"too large", "", KataOptions{DropIn: []byte(strings.Repeat("# x\n", MaxDropIn/4+1))}, []string{"expected at most"}},
		{"malformed proxy", "", KataOptions{HTTPSProxy: "proxy.example:3128"}, []string{"https proxy", "expected a URL"}},
		{"proxy with a space", "", KataOptions{HTTPSProxy: "http://p:1 init=/bin/sh"}, []string{"without spaces"}},
		{"malformed no-proxy", "", KataOptions{NoProxy: "a, b"}, []string{"no-proxy", "entry 2"}},
		{"unknown annotation", "", KataOptions{Annotations: []string{"default_memory", "memory_size"}}, []string{`"memory_size"`, "not one of Kata 4.1.0's hypervisor annotations"}},
		{"custom name invalid", "Kata_Big", KataOptions{}, []string{`custom runtime "Kata_Big"`, "lower-case"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, dir, "etc/containerd/config.toml", "version = 3\n")
			before := readTree(t, dir)
			_, err := Render(mustParse(t, "kubeadm-qemu-none"), targetFor(t, "kubeadm", 3), Options{Paths: Paths{Custom: tc.custom}, Kata: tc.o})
			if err == nil || !errors.Is(err, ErrBadKataOptions) {
				t.Fatalf("not refused: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if after := readTree(t, dir); !maps.Equal(after, before) {
				t.Error("a refused render changed the tree")
			}
		})
	}
}

// TestKataDropInApply: apply writes the drop-in with the configuration;
// the same drop-in again changes nothing; adding or dropping the drop-in
// on an applied platform moves its configuration without a remove; remove
// takes the drop-in and its directories away.
func TestKataDropInApply(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", "version = 3\n")
	before := contents(readTree(t, dir))
	fsys := openRoot(t, dir)
	p := mustParse(t, "kubeadm-qemu-none")
	renderWith := func(o KataOptions) *Rendered {
		r, err := Render(p, targetFor(t, "kubeadm", 3), Options{Kata: o})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	drop := "opt/berth/etc/kata/runtimes/kubeadm-qemu-none/config.d/50-user-overrides.toml"
	plain := "opt/berth/etc/kata/kubeadm-qemu-none.toml"

	if _, err := Apply(fsys, renderWith(KataOptions{})); err != nil {
		t.Fatal(err)
	}
	with := renderWith(KataOptions{DropIn: []byte(qemuDropIn)})
	res, err := Apply(fsys, with)
	if err != nil {
		t.Fatalf("adding a drop-in to an applied platform: %v", err)
	}
	tree := contents(readTree(t, dir))
	if _, ok := tree[plain]; ok {
		t.Errorf("the configuration's old place %s is left behind (changed %v)", plain, res.Changed)
	}
	if !strings.HasSuffix(tree[drop], qemuDropIn) {
		t.Errorf("drop-in not written: %v", res.Changed)
	}
	applied := readTree(t, dir)
	if res, err := Apply(fsys, renderWith(KataOptions{DropIn: []byte(qemuDropIn)})); err != nil || len(res.Changed) != 0 {
		t.Errorf("re-apply with the same drop-in: %+v, %v", res, err)
	}
	if !maps.Equal(readTree(t, dir), applied) {
		t.Error("re-apply with the same drop-in touched files")
	}
	if _, err := Apply(fsys, renderWith(KataOptions{})); err != nil {
		t.Fatalf("dropping the drop-in: %v", err)
	}
	tree = contents(readTree(t, dir))
	if _, ok := tree[drop]; ok {
		t.Error("drop-in left after it was dropped")
	}
	if _, ok := tree[plain]; !ok {
		t.Error("configuration not back in its place")
	}
	if _, err := Apply(fsys, with); err != nil {
		t.Fatal(err)
	}
	if _, err := Remove(fsys, with.Handler); err != nil {
		t.Fatal(err)
	}
	if after := contents(readTree(t, dir)); !maps.Equal(after, before) {
		t.Errorf("after remove the tree differs: %v", maps.Keys(after))
	}
	if _, err := os.Stat(filepath.Join(dir, "opt/berth/etc/kata/runtimes")); !os.IsNotExist(err) {
		t.Errorf("runtimes/ left behind: %v", err)
	}
}

// FuzzCheckDropIn: the drop-in validator never panics, and whatever it
// accepts decodes as TOML whose every key is one the configuration has.
func FuzzCheckDropIn(f *testing.F) {
	f.Add([]byte(qemuDropIn))
	f.Add([]byte("hypervisor.qemu.default_memory = 1\n"))
	f.Add([]byte("[agent.kata]\nenable_debug = true\n[hypervisor.qemu.factory]\n"))
	f.Add([]byte("[[hypervisor.qemu]]\n"))
	p := mustParse(f, "kubeadm-qemu-none")
	var base map[string]any
	if err := toml.Unmarshal(KataConfig(p, Paths{Prefix: DefaultPrefix}), &base); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := CheckDropIn(p, "fuzz", data); err != nil {
			return
		}
		var m map[string]any
		if err := toml.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted a drop-in that does not parse: %v", err)
		}
		var walk func(have, m map[string]any, at string)
		walk = func(have, m map[string]any, at string) {
			for k, v := range m {
				h, ok := have[k]
				if !ok {
					t.Fatalf("accepted %s%s, which the configuration does not have", at, k)
				}
				if sub, ok := v.(map[string]any); ok {
					hs, _ := h.(map[string]any)
					walk(hs, sub, at+k+".")
				}
			}
		}
		walk(base, m, "")
	})
}
