package nodereport

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/testkit/testhosts"
)

// worstInstall is the largest install status a node-installer could
// record: more platforms than fit, every name and handler at its limit and
// every error far past it.
func worstInstall() v1alpha1.InstallStatus {
	s := v1alpha1.InstallStatus{
		Version: strings.Repeat("v", 300),
		Digest:  "sha256:" + strings.Repeat("f", 64),
		Time:    metav1.NewTime(epoch),
	}
	for i := range 40 {
		s.Platforms = append(s.Platforms, v1alpha1.PlatformInstall{
			Name:    fmt.Sprintf("%02d-%s", i, strings.Repeat("p", 80)),
			Handler: strings.Repeat("h", 200),
			State:   []v1alpha1.InstallState{v1alpha1.InstallInstalled, v1alpha1.InstallNotReady, v1alpha1.InstallFailed}[i%3],
			Error:   strings.Repeat("é", 1000),
		})
	}
	return s
}

// TestInstallSizeBudget fills every fixture host's report with the worst
// install status and checks it stays under 8 KiB, with failed entries kept
// and the rest counted.
func TestInstallSizeBudget(t *testing.T) {
	for _, h := range testhosts.Names(t) {
		t.Run(h, func(t *testing.T) {
			r := WithInstall(fixtureReport(t, h), new(worstInstall()))
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 8<<10 {
				t.Errorf("report with install status is %d bytes, want under 8 KiB", len(b))
			}
			in := r.Install
			if len(in.Platforms) == 0 || in.PlatformsOmitted == 0 || int(in.PlatformsOmitted)+len(in.Platforms) != 40 {
				t.Fatalf("%d platforms kept, %d omitted, want some of each adding up to 40", len(in.Platforms), in.PlatformsOmitted)
			}
			for _, p := range in.Platforms {
				if p.State != v1alpha1.InstallFailed {
					t.Errorf("%s kept before a failed platform: %s", p.State, p.Name)
				}
				if len(p.Error) > v1alpha1.MaxTextLen || !strings.HasSuffix(p.Error, "…") || len(p.Name) > 63 || len(p.Handler) > v1alpha1.MaxNameLen {
					t.Errorf("entry not cut to the limits: name %d, handler %d, error %d bytes", len(p.Name), len(p.Handler), len(p.Error))
				}
			}
			t.Logf("%s: %d bytes with %d install entries (+%d omitted)", h, len(b), len(in.Platforms), in.PlatformsOmitted)
		})
	}
}

func TestNormalizeInstall(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name string
		in   v1alpha1.InstallStatus
		want v1alpha1.InstallStatus
	}{{
		name: "failed first, duplicates and unnamed dropped, time in UTC seconds",
		in: v1alpha1.InstallStatus{Version: "3.24.0", Time: metav1.NewTime(at), Platforms: []v1alpha1.PlatformInstall{
			{Name: "a", State: v1alpha1.InstallInstalled},
			{Name: "b", State: v1alpha1.InstallNotReady, Error: "tee.snp.firmware: too old"},
			{Name: "a", State: v1alpha1.InstallFailed},
			{State: v1alpha1.InstallFailed},
			{Name: "c", State: v1alpha1.InstallFailed, Error: "fetching: 404"},
		}},
		want: v1alpha1.InstallStatus{Version: "3.24.0", Time: metav1.NewTime(at.UTC().Truncate(time.Second)), Platforms: []v1alpha1.PlatformInstall{
			{Name: "c", State: v1alpha1.InstallFailed, Error: "fetching: 404"},
			{Name: "b", State: v1alpha1.InstallNotReady, Error: "tee.snp.firmware: too old"},
			{Name: "a", State: v1alpha1.InstallInstalled},
		}},
	}, {
		name: "a digest that is not one is dropped",
		in:   v1alpha1.InstallStatus{Digest: strings.Repeat("x", 100)},
		want: v1alpha1.InstallStatus{},
	}, {
		name: "more than MaxInstallPlatforms are counted",
		in: func() v1alpha1.InstallStatus {
			var s v1alpha1.InstallStatus
			for i := range v1alpha1.MaxInstallPlatforms + 3 {
				s.Platforms = append(s.Platforms, v1alpha1.PlatformInstall{Name: fmt.Sprint("p", i), State: v1alpha1.InstallInstalled})
			}
			return s
		}(),
		want: func() v1alpha1.InstallStatus {
			s := v1alpha1.InstallStatus{PlatformsOmitted: 3}
			for i := range v1alpha1.MaxInstallPlatforms {
				s.Platforms = append(s.Platforms, v1alpha1.PlatformInstall{Name: fmt.Sprint("p", i), State: v1alpha1.InstallInstalled})
			}
			return s
		}(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := json.Marshal(NormalizeInstall(tc.in))
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestInstallAnnotation(t *testing.T) {
	s := v1alpha1.InstallStatus{Version: "3.24.0", Digest: "sha256:" + strings.Repeat("a", 64), Time: metav1.NewTime(epoch),
		Platforms: []v1alpha1.PlatformInstall{{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallFailed, Error: "boom"}}}
	enc, err := EncodeInstall(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, `{"schema":1,`) {
		t.Errorf("annotation %s does not start with its schema", enc)
	}
	back, err := DecodeInstall(enc)
	if err != nil {
		t.Fatal(err)
	}
	if Hash(v1alpha1.Report{Install: back}) != Hash(v1alpha1.Report{Install: &s}) {
		t.Errorf("round trip changed the status: %+v", back)
	}
	for _, tc := range []struct{ name, in, err string }{
		{"oversized", `{"schema":1,"version":"` + strings.Repeat("x", MaxInstallAnnotationBytes) + `"}`, "more than"},
		{"garbled", `{"schema":1,"platforms":[`, "unexpected EOF"},
		{"not an object", `"installed"`, "cannot unmarshal"},
		{"null", `null`, "schema 0"},
		{"other schema", `{"schema":2,"platforms":[]}`, "schema 2, this agent reads schema 1"},
		{"unknown state", `{"schema":1,"platforms":[{"name":"a","state":"exploded"}]}`, `platform "a": unknown state "exploded"`},
		{"trailing data", enc + `{}`, "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeInstall(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), v1alpha1.InstallStatusAnnotation) {
				t.Errorf("DecodeInstall = %v, %v; want an error naming the annotation and %q", got, err, tc.err)
			}
		})
	}
}

// TestWithInstallHash: the hash follows the install status and nothing
// else, so an unchanged status causes no write.
func TestWithInstallHash(t *testing.T) {
	r := fixtureReport(t, "snp-genoa-k3s-ready")
	if WithInstall(r, nil).ContentHash != r.ContentHash {
		t.Error("no install status changes the hash")
	}
	s := worstInstall()
	a, b := WithInstall(r, &s), WithInstall(r, new(worstInstall()))
	if a.ContentHash != b.ContentHash || a.ContentHash == r.ContentHash || a.ContentHash != Hash(a) {
		t.Error("the hash does not follow the install status")
	}
	s.Platforms[2].Error = "another error"
	if WithInstall(r, &s).ContentHash == a.ContentHash {
		t.Error("a new error does not change the hash")
	}
}

// FuzzDecodeInstall: whatever a Node annotation holds, DecodeInstall either
// says what is wrong or returns a status within the report's bounds, and
// never panics.
func FuzzDecodeInstall(f *testing.F) {
	enc, err := EncodeInstall(worstInstall())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{enc, `{"schema":1}`, `{"schema":1,"platforms":[{"name":"a","state":"failed","error":"x"}]}`, `null`, `{`, `{"schema":1,"time":"yesterday"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := DecodeInstall(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if installSize(*s) > v1alpha1.MaxInstallBytes || len(s.Platforms) > v1alpha1.MaxInstallPlatforms {
			t.Fatalf("decoded status out of bounds: %d bytes, %d platforms", installSize(*s), len(s.Platforms))
		}
		for _, p := range s.Platforms {
			if p.Name == "" || len(p.Error) > v1alpha1.MaxTextLen {
				t.Fatalf("entry out of bounds: %+v", p)
			}
		}
	})
}
