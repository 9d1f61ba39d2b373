package cli

import (
	"fmt"

	"berth.dev/berth/internal/node/refvalues"
)

// maxInitDataFile bounds --initdata: a few configuration files and an
// agent policy, or their gzip+base64 annotation.
const maxInitDataFile = 4 << 20

// initDataValues reads --initdata and computes its binding for tee.
func initDataValues(name, tee string) (*refvalues.InitDataValues, error) {
	b, err := readLimited(name, maxInitDataFile)
	if err != nil {
		return nil, fmt.Errorf("--initdata: %w", err)
	}
	return refvalues.InitData(name, b, tee)
}
