package discover

import (
	"regexp"
	"strings"
)

// bootLogSources are tried in order on an offline root: a snapshot stores
// the kernel ring buffer as "dmesg" at its top; distributions keep a copy
// of the boot messages in var/log/dmesg.
var bootLogSources = []string{"dmesg", "var/log/dmesg", "var/log/kern.log"}

// bootLogInteresting selects the lines berth keeps: KVM, SEV/SNP, TDX, SGX,
// IOMMU, PSP (ccp) and VFIO messages.
var bootLogInteresting = regexp.MustCompile(`(?i)(kvm|SEV|SNP|RMP|tdx|sgx|AMD-Vi|DMAR|IOMMU|ccp|vfio|hibernat)`)

// dmesgPrefix matches a leading "[   12.345678] " timestamp or a kmsg
// "6,1234,5678,-;" header.
var dmesgPrefix = regexp.MustCompile(`^(\[\s*\d+\.\d+\]\s*|<\d+>|\d+,\d+,\d+,[^;]*;)`)

// bootLines returns the boot-log lines that matter, without timestamps, and
// where they came from. ok is false when no boot log could be read; the
// reason is recorded once under kernel.bootLog.
func (s *session) bootLines() (lines []string, source string, ok bool) {
	s.bootOnce.Do(func() {
		var reasons []string
		for _, p := range s.bootLogCandidates() {
			b, err := s.root.FS().ReadFile(p)
			if err != nil {
				reasons = append(reasons, ReadReason(p, err))
				continue
			}
			s.bootLog = filterBootLog(string(b))
			s.bootSrc = p
			return
		}
		s.bootErr = strings.Join(reasons, "; ")
		s.unknownf("kernel.bootLog", "%s", s.bootErr)
	})
	return s.bootLog, s.bootSrc, s.bootSrc != ""
}

func (s *session) bootLogCandidates() []string {
	return bootLogSources
}

// filterBootLog keeps the interesting lines of a dmesg text, stripped of
// timestamps, capped so that a huge log cannot bloat Facts.
func filterBootLog(text string) []string {
	const maxLines = 200
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(dmesgPrefix.ReplaceAllString(strings.TrimRight(l, "\r"), ""))
		if l == "" || !bootLogInteresting.MatchString(l) {
			continue
		}
		out = append(out, l)
		if len(out) == maxLines {
			break
		}
	}
	return out
}
