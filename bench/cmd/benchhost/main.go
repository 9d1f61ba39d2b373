// Command benchhost writes a generated benchmark host root (package
// bench/benchhost) into a directory, for bench/peers.sh:
//
//	go run ./bench/cmd/benchhost -o DIR [-variant base|large]
package main

import (
	"flag"
	"fmt"
	"os"

	"berth.dev/berth/bench/benchhost"
)

func main() {
	out := flag.String("o", "", "directory to write the host root into (created)")
	variant := flag.String("variant", "large", "base (8 GPUs with VFs, 2 NICs with 128 VFs each) or large (filled up to 4,096 PCI functions)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "benchhost: -o DIR is required")
		os.Exit(2)
	}
	var spec benchhost.Spec
	switch *variant {
	case "base":
		spec = benchhost.Base()
	case "large":
		spec = benchhost.Large()
	default:
		fmt.Fprintf(os.Stderr, "benchhost: -variant %q: expected base or large\n", *variant)
		os.Exit(2)
	}
	sum, err := benchhost.Write(*out, spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchhost: writing %s: %v\n", *out, err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d PCI functions (%d VFs, %d GPUs)\n", *out, sum.Functions, sum.VFs, sum.GPUs)
}
