package install

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

func TestExtractRefuses(t *testing.T) {
	reg := func(tw *tar.Writer, name string, data string) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
		tw.Write([]byte(data))
	}
	tests := []struct {
		name    string
		build   func(tw *tar.Writer)
		members []manifest.Member
		wantErr string
	}{{
		name:    "install path escaping the prefix",
		build:   func(tw *tar.Writer) { reg(tw, "a", "x") },
		members: []manifest.Member{{Name: "a", Path: "../../etc/passwd", Mode: "0644"}},
		wantErr: "escapes the prefix",
	}, {
		name: "symlink member",
		build: func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"})
		},
		members: []manifest.Member{{Name: "a", Path: "bin/a", Mode: "0644"}},
		wantErr: "not a regular file",
	}, {
		name:    "missing member",
		build:   func(tw *tar.Writer) { reg(tw, "a", "x") },
		members: []manifest.Member{{Name: "a", Path: "bin/a", Mode: "0644"}, {Name: "./b", Path: "bin/b", Mode: "0644"}},
		wantErr: "lacks members ./b",
	}, {
		name: "path through a symlink planted in the stage",
		build: func(tw *tar.Writer) {
			reg(tw, "a", "x")
		},
		members: []manifest.Member{{Name: "a", Path: "evil/a", Mode: "0644"}},
		wantErr: "escapes",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			tc.build(tw)
			tw.Close()
			dir := t.TempDir()
			arc := filepath.Join(t.TempDir(), "a.tar")
			os.WriteFile(arc, b.Bytes(), 0o644)
			outside := t.TempDir()
			os.Symlink(outside, filepath.Join(dir, "evil"))
			c := manifest.Component{Name: "c", Archive: &manifest.Archive{Type: "tar", Members: tc.members}}
			err := Extract(context.Background(), arc, c, dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("wrote outside the stage: %v", ents)
			}
		})
	}
}

func TestBundleRoundTrip(t *testing.T) {
	s := newReleaseServer(t)
	rel := makeRelease(t, "1.0.0", s.URL, 1)
	s.set(func() *release { return rel }, nil)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	tdx := mustPlatform(t, "kubeadm-qemu-tdx")
	var cs []manifest.Component
	seen := map[string]bool{}
	for _, p := range []platform.Platform{snp, tdx} {
		r, _ := rel.m.Resolve(p)
		for _, c := range r {
			if !seen[c.Name] {
				seen[c.Name] = true
				cs = append(cs, c)
			}
		}
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar")
	out, _ := os.Create(bundle)
	e := newEnv(t)
	n, err := WriteBundle(context.Background(), out, []byte(rel.yaml), cs, e.installer(t).Fetcher, t.TempDir())
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, c := range cs {
		want += c.Size
	}
	if n != want {
		t.Errorf("bundled %d bytes, want %d", n, want)
	}
	s.Close() // air gap

	b, err := OpenBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Manifest()
	if err != nil || string(data) != rel.yaml {
		t.Fatalf("bundle manifest: %v", err)
	}
	m, err := manifest.Parse(data, bundle)
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t) // a fresh machine: empty cache
	in := e2.installer(t, bundle)
	in.Fetcher.Attempts = 1
	res := install(t, in, m, tdx)
	if res.Fetched != 0 {
		t.Errorf("fetched %d bytes with a bundle", res.Fetched)
	}
	assertInstalled(t, e2.prefix, rel.expect(t, tdx))
	// A platform the bundle was not made for fails, naming the component.
	_, err = in.Plan(m, []platform.Platform{mustPlatform(t, "kubeadm-clh-none")})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := in.Plan(m, []platform.Platform{mustPlatform(t, "kubeadm-clh-none")})
	// Components are fetched concurrently: the error names whichever
	// missing one failed first.
	var missing []string
	for _, c := range pl.Components {
		if !slices.ContainsFunc(cs, func(b manifest.Component) bool { return b.SHA256 == c.SHA256 }) {
			missing = append(missing, c.Name)
		}
	}
	_, err = in.Install(context.Background(), pl)
	if err == nil || len(missing) == 0 || !slices.ContainsFunc(missing, func(n string) bool { return strings.Contains(err.Error(), "component "+n+" ") }) {
		t.Errorf("error %v, want one naming a component not in the bundle (%v)", err, missing)
	}
}
