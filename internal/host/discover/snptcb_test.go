package discover

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// genoaStatus is struct sev_user_data_snp_status with the values of the
// Genoa host in reference sample amd_snp_host_good_genoa_hbos.txt (API
// 1.55 build 38, current = reported TCB: boot loader 9, TEE 0, SNP 22,
// microcode 72), as recorded in fixture snp-genoa-k3s-ready.
const genoaStatus = "013701012600000000000000000000000900000000001648" + "0900000000001648"

func TestParseSEVProbe(t *testing.T) {
	chip := strings.Repeat("ab", 64)
	tests := []struct {
		name     string
		p        sevProbe
		reported string
		chipID   string
		wantErr  string
	}{
		{name: "genoa sample", p: sevProbe{SNPPlatformStatus: genoaStatus}, reported: "0x4816000000000009"},
		{name: "with chip id", p: sevProbe{SNPPlatformStatus: genoaStatus, ChipID: chip}, reported: "0x4816000000000009", chipID: chip},
		{name: "two sockets", p: sevProbe{SNPPlatformStatus: genoaStatus, ChipID: chip + chip}, reported: "0x4816000000000009", chipID: chip + chip},
		{name: "probe failed", p: sevProbe{Error: "SNP_PLATFORM_STATUS: operation not permitted", Errno: "EPERM"}, wantErr: "operation not permitted"},
		{name: "short status", p: sevProbe{SNPPlatformStatus: genoaStatus[:62]}, wantErr: "31 bytes, expected 32"},
		{name: "long status", p: sevProbe{SNPPlatformStatus: genoaStatus + "00"}, wantErr: "33 bytes, expected 32"},
		{name: "status not hex", p: sevProbe{SNPPlatformStatus: "zz" + genoaStatus[2:]}, wantErr: "snpPlatformStatus: not hex"},
		{name: "no status", p: sevProbe{}, wantErr: "0 bytes, expected 32"},
		{name: "chip id not hex", p: sevProbe{SNPPlatformStatus: genoaStatus, ChipID: "xy"}, wantErr: "chipId: not hex"},
		{name: "chip id cut", p: sevProbe{SNPPlatformStatus: genoaStatus, ChipID: chip[:126]}, wantErr: "chipId: 63 bytes"},
		{name: "chip id too long", p: sevProbe{SNPPlatformStatus: genoaStatus, ChipID: strings.Repeat(chip, 9)}, wantErr: "at most 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSEVProbe(tt.p, "test")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("got %+v, %v; want no value and an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Reported != tt.reported || got.Current != tt.reported || got.ChipID != tt.chipID || got.Source != "test" {
				t.Errorf("got %+v, want reported = current = %s, chip id %q", got, tt.reported, tt.chipID)
			}
		})
	}
}

// TestSNPTCBRoots covers where the TCB comes from: the recorded probe of
// the Genoa fixture, and the reasons it is unknown elsewhere.
func TestSNPTCBRoots(t *testing.T) {
	yes := true
	writeRecorded := func(t *testing.T, dir, probes string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, ".berth"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, hostfs.RecordedFile), []byte(`{"schemaVersion":1,"probes":{`+probes+`}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withSev := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dev", "sev"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name       string
		root       func(t *testing.T) hostfs.Root
		kvmSEV     *bool
		reported   string
		wantReason string // "" with reported: no unknown entry; both "": neither
	}{
		{name: "genoa fixture, recorded probe", root: func(t *testing.T) hostfs.Root {
			return openDir(t, filepath.Join("..", "..", "..", "testdata", "hosts", "snp-genoa-k3s-ready"))
		}, reported: "0x4816000000000009"},
		{name: "fixture without the recorded probe", root: func(t *testing.T) hostfs.Root { return openDir(t, withSev(t)) },
			wantReason: "offline root: no recorded /dev/sev probe"},
		{name: "recorded probe that failed", root: func(t *testing.T) hostfs.Root {
			dir := withSev(t)
			writeRecorded(t, dir, `"sev":{"error":"open /dev/sev: permission denied","errno":"EACCES"}`)
			return openDir(t, dir)
		}, wantReason: "permission denied: open /dev/sev"},
		{name: "recorded probe malformed", root: func(t *testing.T) hostfs.Root {
			dir := withSev(t)
			writeRecorded(t, dir, `"sev":{"snpPlatformStatus":"0137"}`)
			return openDir(t, dir)
		}, wantReason: "unparseable: snpPlatformStatus: SNP platform status is 2 bytes"},
		{name: "recorded probe of the wrong type", root: func(t *testing.T) hostfs.Root {
			dir := withSev(t)
			writeRecorded(t, dir, `"sev":[1,2]`)
			return openDir(t, dir)
		}, wantReason: "unparseable: decoding recorded probe"},
		{name: "AMD host without /dev/sev", root: func(t *testing.T) hostfs.Root { return openDir(t, t.TempDir()) }, kvmSEV: &yes,
			wantReason: "missing: no /dev/sev"},
		{name: "host without SEV at all", root: func(t *testing.T) hostfs.Root { return openDir(t, t.TempDir()) }},
		{name: "live root, dev/sev a regular file, never opened as a device", root: func(t *testing.T) hostfs.Root {
			l, err := hostfs.NewLive(withSev(t))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, wantReason: "missing: open "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{root: tt.root(t)}
			got := s.snpTCB(&facts.SNP{KVMSEV: tt.kvmSEV})
			var reasons []string
			for _, m := range s.unknown {
				if m.Field == "tee.snp.tcb" {
					reasons = append(reasons, m.Reason)
				}
			}
			switch {
			case tt.reported != "":
				if got == nil || got.Reported != tt.reported || !got.Recorded || !strings.Contains(got.Source, "recorded") || len(reasons) != 0 {
					t.Errorf("got %+v, unknown %q; want reported %s from the recorded probe", got, reasons, tt.reported)
				}
			case tt.wantReason != "":
				if got != nil || len(reasons) != 1 || !strings.HasPrefix(reasons[0], tt.wantReason) {
					t.Errorf("got %+v, unknown %q; want no TCB and one reason starting %q", got, reasons, tt.wantReason)
				}
			default:
				if got != nil || len(reasons) != 0 {
					t.Errorf("got %+v, unknown %q; want neither", got, reasons)
				}
			}
		})
	}
}

// TestSNPTCBLive asks this machine's /dev/sev through a live root: without
// one (as on CI runners) the TCB is absent; with one it is read or its
// reason given.
func TestSNPTCBLive(t *testing.T) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	got := s.snpTCB(&facts.SNP{})
	_, statErr := os.Stat("/dev/sev")
	switch {
	case os.IsNotExist(statErr):
		if got != nil {
			t.Errorf("no /dev/sev, yet a TCB: %+v", got)
		}
	case got != nil:
		if _, err := hex.DecodeString(strings.TrimPrefix(got.Reported, "0x")); err != nil || got.Recorded {
			t.Errorf("live TCB %+v", got)
		}
	default:
		if len(s.unknown) != 1 || s.unknown[0].Field != "tee.snp.tcb" {
			t.Errorf("/dev/sev not read and no reason: %+v", s.unknown)
		}
	}
}

func openDir(t *testing.T, dir string) hostfs.Root {
	t.Helper()
	d, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// FuzzParseSEVProbe holds the parser of recorded /dev/sev probes (an
// untrusted file in a snapshot) to its contract: no panic, and a value only
// for a 32-byte status and whole 64-byte chip IDs.
func FuzzParseSEVProbe(f *testing.F) {
	f.Add(genoaStatus, "", "")
	f.Add(genoaStatus, strings.Repeat("ab", 64), "")
	f.Add("0137", "", "")
	f.Add("", "", "open /dev/sev: no such file or directory")
	f.Fuzz(func(t *testing.T, status, chip, errText string) {
		got, err := parseSEVProbe(sevProbe{SNPPlatformStatus: status, ChipID: chip, Error: errText}, "fuzz")
		if err != nil {
			if got != nil {
				t.Fatalf("value %+v with error %v", got, err)
			}
			return
		}
		if errText != "" {
			t.Fatalf("value despite probe error %q", errText)
		}
		if b, _ := hex.DecodeString(status); len(b) != snpStatusSize {
			t.Fatalf("status of %d bytes accepted", len(b))
		}
		if n := len(got.ChipID) / 2; n%chipIDSize != 0 || n > maxChipID {
			t.Fatalf("chip id of %d bytes accepted", n)
		}
	})
}
