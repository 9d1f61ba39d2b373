package configure

import (
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/platform"
)

// TestUserDropInRender: the operator's containerd drop-in goes beside the
// handler's own drop-in where containerd reads one, and is refused,
// saying why, where it would have to go into a file that is not berth's.
func TestUserDropInRender(t *testing.T) {
	const dropIn = "[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 7\n"
	for _, tc := range []struct {
		name, plat, layout string
		version            int
		data               string
		path, err          string
	}{
		{"kubeadm, containerd 2", "kubeadm-qemu-none", "kubeadm", 3, dropIn, "etc/containerd/conf.d/" + ContainerdUserDropInName, ""},
		{"k0s drop-in directory", "k0s-qemu-none", "k0s", 2, dropIn, "etc/k0s/containerd.d/" + ContainerdUserDropInName, ""},
		{"kubeadm, containerd 1.x", "kubeadm-qemu-none", "kubeadm", 2, dropIn, "", "loads no drop-in of berth's"},
		{"k3s template", "k3s-qemu-none", "k3s", 3, dropIn, "", "loads no drop-in of berth's"},
		{"CRI-O", "openshift-qemu-none", "openshift", 0, dropIn, "", "runtime is CRI-O"},
		{"not TOML", "kubeadm-qemu-none", "kubeadm", 3, "a = 1\n[plugins\n", "", "line 2: not TOML"},
		{"empty", "kubeadm-qemu-none", "kubeadm", 3, " \n", "", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := platform.Parse(tc.plat)
			if err != nil {
				t.Fatal(err)
			}
			target := Target{LayoutName: tc.layout, Layout: platform.Layouts()[tc.layout], ConfigVersion: tc.version}
			r, err := Render(p, target, Options{ContainerdUserDropIn: []byte(tc.data)})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Render = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(r.Host, func(f File) bool { return strings.HasSuffix(f.Path, ContainerdUserDropInName) })
			if i < 0 || r.Host[i].Path != tc.path || r.Host[i].Kind != Owned || !strings.HasSuffix(string(r.Host[i].Content), tc.data) {
				t.Fatalf("files %+v: want the drop-in, owned, at %s", r.Host, tc.path)
			}
		})
	}
}

// TestUserDropInMoves: a handler's files may change between two applies
// by the operator's containerd drop-in given or taken away; any other
// change outside the Kata directory still needs a remove first.
func TestUserDropInMoves(t *testing.T) {
	kata := OwnedFile{Path: "opt/berth/etc/kata/configuration-qemu.toml", Kind: Owned}
	drop := OwnedFile{Path: "etc/containerd/conf.d/berth-kata-qemu.toml", Kind: Owned}
	imports := OwnedFile{Path: "etc/containerd/config.toml", Kind: Block, Block: "imports"}
	user := OwnedFile{Path: "etc/containerd/conf.d/" + ContainerdUserDropInName, Kind: Owned}
	other := OwnedFile{Path: "etc/containerd/conf.d/berth-other.toml", Kind: Owned}
	st := &State{Platforms: map[string]PlatformState{}}
	r := &Rendered{Handler: "kata-qemu"}
	for _, tc := range []struct {
		name       string
		prev, next []OwnedFile
		gone       []string
		ok         bool
	}{
		{"drop-in added", []OwnedFile{kata, drop, imports}, []OwnedFile{kata, drop, imports, user}, nil, true},
		{"drop-in taken away", []OwnedFile{kata, drop, imports, user}, []OwnedFile{kata, drop, imports}, []string{user.Path}, true},
		{"another file", []OwnedFile{kata, drop, imports}, []OwnedFile{kata, drop, imports, other}, nil, false},
		{"another block", []OwnedFile{kata, drop, imports}, []OwnedFile{kata, drop}, nil, false},
	} {
		gone, ok := movableFiles(st, r, tc.prev, tc.next)
		if ok != tc.ok || !slices.Equal(gone, tc.gone) {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, gone, ok, tc.gone, tc.ok)
		}
	}
}

// FuzzUserDropIn: whatever the operator gives, CheckUserDropIn answers
// without panicking, and what it accepts renders into a drop-in that is
// TOML, as apply then validates it.
func FuzzUserDropIn(f *testing.F) {
	for _, s := range []string{
		"[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 7\n",
		"oom_score = -999\n",
		"[plugins\n",
		"a = '''\nmultiline",
		"",
	} {
		f.Add([]byte(s))
	}
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		f.Fatal(err)
	}
	target := Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckUserDropIn("fuzz", data) != nil {
			return
		}
		r, err := Render(p, target, Options{ContainerdUserDropIn: data})
		if err != nil {
			t.Fatalf("accepted drop-in does not render: %v", err)
		}
		last := r.Host[len(r.Host)-1]
		if err := validate(last, last.Path, last.Content); err != nil {
			t.Fatalf("rendered drop-in is not valid: %v\n%q", err, last.Content)
		}
	})
}
