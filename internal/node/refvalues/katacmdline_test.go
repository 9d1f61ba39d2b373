package refvalues

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// kataCmdlineVector is one line of testdata/kata-cmdline/vectors.tsv: the
// command line Kata 4.1.0's own code built for a configuration file.
type kataCmdlineVector struct {
	config, tee string
	cpus        int
	cmdline     string
}

func readKataCmdlineVectors(t *testing.T) []kataCmdlineVector {
	t.Helper()
	f, err := os.Open("testdata/kata-cmdline/vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []kataCmdlineVector
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		if strings.HasPrefix(s.Text(), "#") {
			continue
		}
		fs := strings.Split(s.Text(), "\t")
		if len(fs) != 4 {
			t.Fatalf("vectors.tsv:%d: %d fields, expected 4", n, len(fs))
		}
		cpus, err := strconv.Atoi(fs[2])
		if err != nil {
			t.Fatalf("vectors.tsv:%d: host_cpus: %v", n, err)
		}
		out = append(out, kataCmdlineVector{fs[0], fs[1], cpus, fs[3]})
	}
	if len(out) == 0 {
		t.Fatal("vectors.tsv holds no vectors")
	}
	return out
}

// TestKataCmdlineOracle: for every configuration file Kata's own code was
// run on, berth derives the same command line.
func TestKataCmdlineOracle(t *testing.T) {
	for _, v := range readKataCmdlineVectors(t) {
		t.Run(v.config, func(t *testing.T) {
			files, err := ReadKataConfigFiles(LocalKataConfigFS{}, filepath.Join("testdata/kata-cmdline/configs", v.config))
			if err != nil {
				t.Fatal(err)
			}
			got, err := KataCmdlineFiles(files, KataHost{CPUs: v.cpus})
			if err != nil {
				t.Fatal(err)
			}
			if got != v.cmdline {
				t.Errorf("command line differs from Kata's\n got: %s\nwant: %s", got, v.cmdline)
			}
		})
	}
}

// TestKataCmdlineRendered: the configuration berth renders today for each
// platform the oracle ran on still gives Kata's command line. A failure
// means the rendering changed what the guest boots with: run the oracle
// again (testdata/kata-cmdline/ORACLE.md) on the new files.
func TestKataCmdlineRendered(t *testing.T) {
	n := 0
	for _, v := range readKataCmdlineVectors(t) {
		name, ok := strings.CutSuffix(v.config, ".toml")
		if !ok || !strings.HasPrefix(name, "kata-") {
			continue // a hand-made variant, not a platform
		}
		n++
		t.Run(name, func(t *testing.T) {
			p, err := platform.Parse(name)
			if err != nil {
				t.Fatal(err)
			}
			if tee := map[platform.TEE]string{platform.TDX: "tdx", platform.SNP: "snp", platform.NoTEE: "none"}[p.TEE()]; tee != v.tee {
				t.Fatalf("platform %s has TEE %s, the vector was made for %q", p, p.TEE(), v.tee)
			}
			cfg := configure.KataConfig(p, configure.Paths{Prefix: "/opt/berth"})
			got, err := KataCmdline(cfg, name, KataHost{CPUs: v.cpus})
			if err != nil {
				t.Fatal(err)
			}
			if got != v.cmdline {
				t.Errorf("berth's rendered configuration for %s gives another command line than the one Kata built\n got: %s\nwant: %s", p, got, v.cmdline)
			}
		})
	}
	if n < 16 {
		t.Errorf("%d platform vectors, expected at least 16 (qemu, tdx, snp, coco-dev, nvidia-gpu{,-snp,-tdx}, nvidia-cpu, each with and without debug)", n)
	}
}

func TestKataCmdlineRefused(t *testing.T) {
	base, err := os.ReadFile("testdata/kata-cmdline/configs/kata-qemu-tdx.toml")
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(string(base), old) {
			t.Fatalf("kata-qemu-tdx.toml has no %q", old)
		}
		return strings.Replace(string(base), old, new, 1)
	}
	for _, tc := range []struct{ name, config, want string }{
		{"not toml", "[hypervisor.qemu\n", "not a Kata configuration file"},
		{"other hypervisor", "[hypervisor.clh]\nimage = \"x\"\n", "[hypervisor.qemu]"},
		{"image and initrd", replace("[hypervisor.qemu]\n", "[hypervisor.qemu]\ninitrd = \"/i\"\n"), "both image and initrd"},
		{"no root", "[hypervisor.qemu]\nkernel = \"/k\"\n", "neither image nor initrd"},
		{"rootfs type", replace(`rootfs_type = "ext4"`, `rootfs_type = "btrfs"`), `rootfs_type "btrfs"`},
		{"verity without salt", replace(`kernel_verity_params = ""`, "kernel_verity_params = \"root_hash=ab,data_blocks=1,data_block_size=4096,hash_block_size=4096\""), "kernel_verity_params: no salt"},
		{"verity block size", replace(`kernel_verity_params = ""`, "kernel_verity_params = \"root_hash=ab,salt=cd,data_blocks=1,data_block_size=4000,hash_block_size=4096\""), "multiples of 512"},
		{"block driver", replace(`block_device_driver = "virtio-scsi"`, `block_device_driver = "ide"`), `block_device_driver "ide"`},
		{"machine", replace(`machine_type = "q35"`, `machine_type = "microvm"`), `machine_type "microvm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KataCmdline([]byte(tc.config), "x.toml", KataHost{CPUs: 2})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "x.toml: ") {
				t.Fatalf("error %v, expected one naming x.toml and containing %q", err, tc.want)
			}
		})
	}
}

func TestKataMaxVCPUs(t *testing.T) {
	for _, tc := range []struct {
		req       uint32
		host, out int
	}{{0, 2, 2}, {1, 2, 1}, {8, 2, 2}, {0, 512, 240}, {300, 512, 240}} {
		if got := kataMaxVCPUs(tc.req, tc.host); got != tc.out {
			t.Errorf("kataMaxVCPUs(%d, %d) = %d, expected %d", tc.req, tc.host, got, tc.out)
		}
	}
}
