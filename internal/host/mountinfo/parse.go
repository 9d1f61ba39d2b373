package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Mount is one line of mountinfo, the fields berth reads.
type Mount struct {
	// Root is the directory of the filesystem mounted here (field 4): a
	// bind mount or a cgroup namespace shows a subdirectory.
	Root string
	// Point is where it is mounted (field 5).
	Point string
	// FSType is the filesystem type, the first field after the " - "
	// separator.
	FSType string
}

// Parse reads a mountinfo file. Lines are read whole however long (a
// mount point may be up to PATH_MAX, and some container hosts have
// thousands of mounts); a line without the separator or with fewer than
// the five fixed fields is an error naming the line, since the kernel
// never writes one and a caller acting on a half-read table (unmounting,
// choosing a cgroup) must not guess.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if line = strings.TrimSuffix(line, "\n"); line != "" {
			pre, post, ok := strings.Cut(line, " - ")
			f := strings.Fields(pre)
			if !ok || len(f) < 5 {
				return out, fmt.Errorf("mountinfo line %d: expected at least 5 fields, then \" - \" and the filesystem type, got %q", n, line)
			}
			fstype, _, _ := strings.Cut(post, " ")
			out = append(out, Mount{Root: Unescape(f[3]), Point: Unescape(f[4]), FSType: fstype})
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("mountinfo line %d: %w", n, err)
		}
	}
}
