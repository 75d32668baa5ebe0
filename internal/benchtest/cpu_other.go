//go:build !unix && !windows

package benchtest

import (
	"errors"
	"time"
)

func process() (time.Duration, error) {
	return 0, errors.New("not available on this system")
}
