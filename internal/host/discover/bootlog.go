package discover

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"berth.dev/berth/internal/host/hostfs"
)

// bootLogFiles are tried in order on an offline root: a snapshot stores
// the kernel ring buffer as "dmesg" at its top; distributions keep a copy
// of the boot messages in var/log/dmesg. A live root reads dev/kmsg first
// and falls back to the saved copies (never to a top-level "dmesg", which
// on a real host is nobody's boot log).
var bootLogFiles = []string{"dmesg", "var/log/dmesg", "var/log/kern.log"}

// bootLogKeywords select the lines berth keeps: KVM, SEV/SNP, TDX, SGX,
// IOMMU, PSP (ccp) and VFIO messages, hibernation (which blocks TDX), and
// the CPU setup's "disabled by BIOS" notes: the kernel clears the vmx/svm
// flag when the firmware locked VT-x/AMD-V off ("SVM disabled (by BIOS) in
// MSR_VM_CR", "x86/cpu: VMX (outside TXT) disabled by BIOS"), and that line
// is the only trace of the cause. Lower case: lines are matched
// case-insensitively.
var bootLogKeywords = []string{"kvm", "sev", "snp", "rmp", "tdx", "sgx", "amd-vi", "dmar", "iommu", "ccp", "vfio", "hibernat", "memory encryption", "by bios"}

// maxBootLines caps the kept lines so that a huge log cannot bloat Facts.
const maxBootLines = 200

// bootLines returns the boot-log lines that matter, without timestamps, and
// where they came from. ok is false when no boot log could be read; the
// reason is recorded once under kernel.bootLog.
func (s *session) bootLines() (lines []string, source string, ok bool) {
	s.bootOnce.Do(func() {
		var reasons []string
		if s.root.Live() && s.opt.KernelLog != nil {
			l, err := s.opt.KernelLog.read(s.root)
			if err == nil {
				s.bootLog, s.bootSrc = l, "dev/kmsg"
				return
			}
			reasons = append(reasons, ReadReason("dev/kmsg", err))
		} else if s.root.Live() {
			if kl, isKL := s.root.(hostfs.KernelLogReader); isKL {
				b, err := kl.KernelLog()
				if err == nil {
					s.bootLog = filterBootLog(b)
					s.bootSrc = "dev/kmsg"
					return
				}
				reasons = append(reasons, ReadReason("dev/kmsg", err))
			}
		}
		for _, p := range s.bootLogCandidates() {
			b, err := s.root.FS().ReadFile(p)
			if err != nil {
				reasons = append(reasons, ReadReason(p, err))
				continue
			}
			s.bootLog = filterBootLog(b)
			s.bootSrc = p
			return
		}
		s.bootErr = strings.Join(reasons, "; ")
		s.unknownf("kernel.bootLog", "%s", s.bootErr)
	})
	return s.bootLog, s.bootSrc, s.bootSrc != ""
}

// KernelLogFollower keeps dev/kmsg open across the discoveries of a
// long-running process (the agent, every interval): each discovery reads
// only the records the kernel added since the one before and filters
// them onto the lines kept so far, instead of reading and filtering the
// whole ring buffer again (on a quiet node 40% of a discovery's CPU).
// The lines are those a full read gives, except that lines the ring
// buffer has since overwritten are still there: a node's boot messages
// stay known however long it runs. Safe for concurrent discoveries.
type KernelLogFollower struct {
	mu     sync.Mutex
	root   hostfs.Root
	stream *hostfs.KernelLogStream
	lines  []string
	// bytesRead counts the message bytes read from dev/kmsg, for tests.
	bytesRead int
}

// NewKernelLogFollower follows the kernel log of root, which must be the
// root the discoveries are given. Close it when done.
func NewKernelLogFollower(root hostfs.Root) *KernelLogFollower {
	return &KernelLogFollower{root: root}
}

// kernelLogOpener is a root that can hold dev/kmsg open (hostfs.Live).
type kernelLogOpener interface {
	OpenKernelLog() (*hostfs.KernelLogStream, error)
}

// read returns the boot-log lines with the records added since the last
// read. A failed read closes the stream and starts over at the next.
func (k *KernelLogFollower) read(root hostfs.Root) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if root != k.root {
		return nil, fmt.Errorf("kernel log follower of %s asked about root %s", k.root.Path(), root.Path())
	}
	if k.stream == nil {
		o, ok := root.(kernelLogOpener)
		if !ok {
			return nil, errors.New("this root cannot hold dev/kmsg open")
		}
		st, err := o.OpenKernelLog()
		if err != nil {
			return nil, err
		}
		k.stream, k.lines = st, nil
	}
	b, err := k.stream.ReadNew()
	if err != nil {
		k.stream.Close()
		k.stream = nil
		return nil, err
	}
	k.bytesRead += len(b)
	if len(k.lines) < maxBootLines {
		k.lines = append(k.lines, filterBootLog(b)...)
		k.lines = k.lines[:min(len(k.lines), maxBootLines)]
	}
	// Clipped: the Facts that hold them never see a later append.
	return slices.Clip(k.lines), nil
}

// Close closes dev/kmsg.
func (k *KernelLogFollower) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream == nil {
		return nil
	}
	err := k.stream.Close()
	k.stream = nil
	return err
}

func (s *session) bootLogCandidates() []string {
	if s.root.Live() {
		return bootLogFiles[1:]
	}
	return bootLogFiles
}

// filterBootLog keeps the interesting lines of a dmesg, kmsg or syslog
// text, stripped of their timestamp or record header, at most maxBootLines.
//
// A kmsg holds a thousand lines or more and berth keeps a few dozen, so
// the lines are first sieved in one pass over the text (keywordLines) and
// only those that hold a keyword anywhere are taken through
// filterBootLine, which decides as if every line had been: the text it
// matches is a part of its line, so a line without a keyword anywhere
// cannot be kept.
//
// It takes the text as read (bytes) or as a string, without a copy of
// the whole: a kmsg is 60-100 KB.
func filterBootLog[T string | []byte](text T) []string {
	keywords := make([][]byte, len(bootLogKeywords))
	for i, k := range bootLogKeywords {
		keywords[i] = []byte(k)
	}
	var out []string
	var low []byte // the line in lower case, reused
	keywordLines(text, keywords, func(l string) bool {
		if kept, ok := filterBootLine(l, &low, keywords); ok {
			out = append(out, kept)
		}
		return len(out) < maxBootLines
	})
	return out
}

// keywordLines calls yield, in order, with each line of text (without its
// newline) in which one of keywords (lower case, three bytes or more)
// appears with ASCII case ignored, until yield returns false.
//
// One pass over the bytes: the lowered three bytes at each offset index a
// small table of the keywords' first three bytes, and only where the table
// says so is a keyword compared. Searching each keyword over the text with
// bytes.Index, or every keyword in every line, costs several times more:
// the keywords start with common letters.
func keywordLines[T string | []byte](text T, keywords [][]byte, yield func(line string) bool) {
	const bits = 12
	var table [1 << bits]uint32 // bit j: keywords[j] may start here
	hash := func(a, b, c byte) uint32 {
		return (uint32(a)<<8 ^ uint32(b)<<4 ^ uint32(c)) & (1<<bits - 1)
	}
	for j, k := range keywords {
		table[hash(k[0]|0x20, k[1]|0x20, k[2]|0x20)] |= 1 << j
	}
	lineStart := 0
	for i := 0; i+3 <= len(text); i++ {
		// OR-ing 0x20 lowers ASCII letters and changes other bytes, whose
		// false hits keywordAt throws out.
		m := table[hash(text[i]|0x20, text[i+1]|0x20, text[i+2]|0x20)]
		if m == 0 || !keywordAt(text[i:], keywords, m) {
			continue
		}
		for j := i - 1; j >= lineStart; j-- {
			if text[j] == '\n' {
				lineStart = j + 1
				break
			}
		}
		end := i
		for end < len(text) && text[end] != '\n' {
			end++
		}
		if !yield(string(text[lineStart:end])) {
			return
		}
		// The rest of the line has nothing more to say.
		i, lineStart = end, end+1
	}
}

// keywordAt reports whether one of the keywords whose bit is set in m
// starts s, ASCII case ignored.
func keywordAt[T string | []byte](s T, keywords [][]byte, m uint32) bool {
	for j, k := range keywords {
		if m&(1<<j) == 0 || len(s) < len(k) {
			continue
		}
		match := true
		for n := range k {
			if lowerASCII(s[n]) != k[n] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// lowerASCII lowers an ASCII capital letter; other bytes are kept.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// filterBootLine decides on one line of a boot log (without its newline):
// ok when it is not a kmsg dictionary continuation and, stripped of its
// timestamp or record header, mentions one of keywords. low is scratch
// space for the lowered line.
func filterBootLine(l string, low *[]byte, keywords [][]byte) (kept string, ok bool) {
	if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
		// kmsg dictionary continuation ("SUBSYSTEM=pci").
		return "", false
	}
	l = strings.TrimSpace(stripLogPrefix(strings.TrimRight(l, "\r")))
	if l == "" {
		return "", false
	}
	*low = appendLowerASCII((*low)[:0], l)
	if !interestingBootLine(*low, keywords) {
		return "", false
	}
	return l, true
}

// interestingBootLine reports whether low, a line with ASCII letters in
// lower case, mentions one of keywords (bootLogKeywords). Matching the
// lowered line with bytes.Contains (vectorised) is several times faster
// than a case-folding scan per keyword.
func interestingBootLine(low []byte, keywords [][]byte) bool {
	for _, k := range keywords {
		if bytes.Contains(low, k) {
			return true
		}
	}
	return false
}

// appendLowerASCII appends s to dst with ASCII letters lowered; other
// bytes (UTF-8 included) are kept as they are, so that only ASCII case is
// ignored.
func appendLowerASCII(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// stripLogPrefix removes a leading "[   12.345678] " dmesg timestamp, a
// "<6>" priority, or a "6,1234,5678,-;" kmsg header.
func stripLogPrefix(l string) string {
	switch {
	case strings.HasPrefix(l, "<"):
		if i := strings.IndexByte(l, '>'); i > 1 && allDigits(l[1:i]) {
			l = l[i+1:]
		}
	case len(l) > 0 && l[0] >= '0' && l[0] <= '9':
		// kmsg: three comma-separated numbers, flags, ';'.
		if i := strings.IndexByte(l, ';'); i > 0 {
			f := strings.SplitN(l[:i], ",", 4)
			if len(f) >= 3 && allDigits(f[0]) && allDigits(f[1]) && allDigits(f[2]) {
				return l[i+1:]
			}
		}
		return l
	}
	if strings.HasPrefix(l, "[") {
		if i := strings.IndexByte(l, ']'); i > 1 && isTimestamp(strings.TrimSpace(l[1:i])) {
			return l[i+1:]
		}
	}
	return l
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isTimestamp accepts "12.345678".
func isTimestamp(s string) bool {
	a, b, ok := strings.Cut(s, ".")
	return ok && allDigits(a) && allDigits(b)
}
