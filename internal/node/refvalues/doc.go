// Package refvalues computes attestation reference values for confidential
// guests from the boot components an operator deploys, so that an
// attestation service can be configured before the first guest runs:
//
//   - AMD SEV-SNP: the launch digest (MEASUREMENT in the attestation report)
//     of a QEMU/KVM guest booted from an AmdSev OVMF image with measured
//     direct boot, for a range of vCPU counts and each product line.
//   - Intel TDX: MRTD of a TDVF (IntelTdx OVMF) image.
//
// The model follows the public specifications: the SEV-SNP firmware ABI
// (PAGE_INFO and the launch digest update), the OVMF SEV metadata and SEV
// hashes table, the VMSA layout of the AMD APM vol. 2, the Intel TDX module
// ABI and the TDVF design guide. Every firmware parser treats its input as
// untrusted and fails with an error naming the offending structure.
package refvalues
