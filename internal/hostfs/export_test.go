package hostfs

// Exported for the external test package (hostile_test.go).

// ForceFallbacks makes the roots opened until restore is called resolve
// paths in userspace instead of with openat2 (walk), and/or reopen checked
// files by resolving them again instead of through /proc/self/fd
// (noProc), as on a kernel without openat2 or a system without procfs.
func ForceFallbacks(walk, noProc bool) (restore func()) {
	old := forceOptions(confineOptions{walk: walk, noProc: noProc})
	return func() { forceOptions(old) }
}

// ResolverOf names the mechanisms a root uses ("openat2", "walk",
// "+reresolve"), or "" for a root that is not a directory or live root.
func ResolverOf(r Root) string {
	switch r := r.(type) {
	case *Dir:
		return r.cfs.resolver()
	case *Live:
		return r.fsys.resolver()
	}
	return ""
}

// HaveOpenat2 reports whether this kernel has openat2 with RESOLVE_IN_ROOT.
func HaveOpenat2() bool { return haveOpenat2() }
