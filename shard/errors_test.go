package shard

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
)

// oldShardError is the mapping the proxy applied to this package's errors
// before they carried their kinds; protocol.ToSQLError must answer every
// error the package makes as it did.
func oldShardError(err error) *protocol.SQLError {
	code := protocol.ERUnknownError.Code
	switch {
	case errors.Is(err, ErrBadKeyValue):
		code = protocol.ERWrongValueForField.Code
	case errors.Is(err, ErrNullKey):
		code = protocol.ERBadNull.Code
	case errors.Is(err, ErrKeyOutOfRange):
		code = protocol.ERNoPartitionForValue.Code
	case errors.Is(err, ErrMissingKey):
		code = protocol.ERNoDefaultForField.Code
	case errors.Is(err, ErrTooManyRows):
		code = protocol.ERTooBigSelect.Code
	case errors.Is(err, ErrCrossShardJoin), errors.Is(err, ErrCrossShardWrite),
		errors.Is(err, ErrShardKeyUpdate), errors.Is(err, ErrUnsupported):
		code = protocol.ERNotSupportedYet.Code
	}
	return protocol.NewError(code, "sluice: %v", err)
}

func TestSentinelsCarryTheirCodes(t *testing.T) {
	_, parseErr := strconv.ParseFloat("x", 64)
	sentinels := []error{ErrCrossShardJoin, ErrCrossShardWrite, ErrMissingKey, ErrNullKey, ErrBadKeyValue,
		ErrKeyOutOfRange, ErrShardKeyUpdate, ErrUnsupported, ErrNotSharded, ErrTooManyRows, ErrMergeInput, ErrMergeSpec}
	var errs []error
	for _, s := range sentinels {
		// The shapes the package returns: a sentinel with the detail,
		// wrapped again by a caller that adds where it happened.
		errs = append(errs, s, fmt.Errorf("%w: t.k column k", s), fmt.Errorf("parameter 2: %w", fmt.Errorf("%w: x", s)))
	}
	errs = append(errs, fmt.Errorf("%w: AVG column %d: %w", ErrMergeInput, 3, parseErr), errors.New("shard: no rule t"))
	distinct := map[uint16]bool{}
	for _, err := range errs {
		got, want := protocol.ToSQLError(err), oldShardError(err)
		if *got != *want {
			t.Errorf("%v: %+v, want %+v", err, *got, *want)
		}
		distinct[got.Code] = true
	}
	if len(distinct) != 7 {
		t.Errorf("%d distinct codes, want 7: %v", len(distinct), distinct)
	}
}
