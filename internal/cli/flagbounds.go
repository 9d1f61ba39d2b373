package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Annotations naming the numeric and duration flags of a command that
// make no sense at zero or below (annotationPositive) or below zero
// (annotationNonNegative: zero means "none"), comma-separated. markRun
// checks them before the command runs, so that --parallel -1 or
// --nfd-expiry -24h is a usage error naming the flag, not a run that
// hangs or writes a directive already expired.
const (
	annotationPositive    = "berth.dev/positive-flags"
	annotationNonNegative = "berth.dev/non-negative-flags"
)

// Positive marks cmd's flags names (int, int64, uint64 or duration) as
// needing a value above zero.
func Positive(cmd *cobra.Command, names ...string) { annotate(cmd, annotationPositive, names) }

// NonNegative marks cmd's flags names as needing zero (none) or more.
func NonNegative(cmd *cobra.Command, names ...string) {
	annotate(cmd, annotationNonNegative, names)
}

func annotate(cmd *cobra.Command, key string, names []string) {
	for _, n := range names {
		if cmd.Flags().Lookup(n) == nil {
			panic(fmt.Sprintf("%s: no flag --%s to bound", cmd.CommandPath(), n))
		}
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	if old := cmd.Annotations[key]; old != "" {
		names = append(strings.Split(old, ","), names...)
	}
	cmd.Annotations[key] = strings.Join(names, ",")
}

// checkFlagBounds is the usage error of the first flag of cmd whose value
// breaks its bound (Positive, NonNegative).
func checkFlagBounds(cmd *cobra.Command) error {
	for _, b := range []struct {
		key  string
		zero bool // zero allowed
	}{{annotationPositive, false}, {annotationNonNegative, true}} {
		list := cmd.Annotations[b.key]
		if list == "" {
			continue
		}
		for name := range strings.SplitSeq(list, ",") {
			f := cmd.Flags().Lookup(name)
			if f == nil {
				continue
			}
			if err := checkBound(f, b.zero); err != nil {
				return UsageErr(err)
			}
		}
	}
	return nil
}

// checkBound checks one flag's value against zero.
func checkBound(f *pflag.Flag, zeroOK bool) error {
	var sign int
	var what string
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(f.Value.String())
		if err != nil {
			return fmt.Errorf("--%s %s: %w", f.Name, f.Value, err)
		}
		sign, what = cmp(int64(d)), "a positive duration"
		if zeroOK {
			what = "a duration of 0 (none) or more"
		}
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		n, err := strconv.ParseInt(f.Value.String(), 10, 64)
		if err != nil {
			// A uint above MaxInt64 is positive.
			return nil
		}
		sign, what = cmp(n), "at least 1"
		if zeroOK {
			what = "0 (none) or more"
		}
	default:
		panic(fmt.Sprintf("--%s is a %s, not a number or a duration", f.Name, f.Value.Type()))
	}
	if sign < 0 || (sign == 0 && !zeroOK) {
		return fmt.Errorf("--%s %s: expected %s", f.Name, f.Value, what)
	}
	return nil
}

func cmp(n int64) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
