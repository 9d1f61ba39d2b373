package cli

import (
	"strings"
	"testing"
)

const rvInitData = rvData + "initdata/"

// TestRefvaluesInitData: --initdata adds the binding to every output
// format; the values are those refvalues' own tests derive from Kata's
// (testdata/initdata/SOURCES.md).
func TestRefvaluesInitData(t *testing.T) {
	const kata = "c6694bb7a29d6f37ec72a15582e004b9f3142159682db8509a304407419a49e5"
	snp := []string{"refvalues", "--platform", "k3s-qemu-snp-genoa", "--firmware", rvData + "OVMF.amdsev.fd", "--vcpus", "1", "--initdata", rvInitData + "kata-oci-utils-test.annotation"}
	tdx := []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--initdata", rvInitData + "kata-oci-utils-test.annotation"}
	tests := []cliCase{
		{name: "snp table", args: snp, wantOut: []string{"Init data:", "annotation, version 0.1.0, sha256", "HOST_DATA  " + kata}},
		{name: "snp json", args: append(snp, "-o", "json"), wantOut: []string{`"initData": {`, `"snpHostData": "` + kata + `"`, `"form": "annotation"`}},
		{name: "snp rvps", args: append(snp, "-o", "rvps"), wantOut: []string{`"type": "sample"`}, wantErr: "snp_host_data / tdx_mr_config_id"},
		{name: "snp contrast", args: append(snp, "-o", "contrast"), wantOut: []string{"SNP"}, wantErr: "init data: Contrast binds"},
		{name: "tdx yaml", args: append(tdx, "-o", "yaml"), wantOut: []string{"tdxMrConfigId: " + kata + strings.Repeat("00", 16)}},
		{name: "tdx table", args: tdx, wantOut: []string{"MRCONFIGID " + kata + strings.Repeat("00", 16)}},
		{name: "bad document", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--initdata", rvData + "SOURCES.md"}, wantCode: ExitUsage, wantErr: "neither an init-data TOML document"},
		{name: "missing file", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--initdata", rvInitData + "nope.toml"}, wantCode: ExitUsage, wantErr: "--initdata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCLICase(t, tt.args, tt) })
	}
}
