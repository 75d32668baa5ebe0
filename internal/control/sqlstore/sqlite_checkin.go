package sqlstore

import (
	"context"
	"fmt"

	"github.com/patchline/patchline/internal/errs"
)

// On SQLite, committing is most of the cost of a check-in, so check-ins
// that arrive while another commit is under way are applied together, in
// one transaction (group commit). Nothing waits for a batch to fill: a
// lone check-in commits at once.

// maxCheckInBatch bounds the check-ins of one transaction.
const maxCheckInBatch = 256

// groupCheckIn hands req to checkInLoop and waits for its result.
func (s *Store) groupCheckIn(ctx context.Context, req *checkInRequest) (checkInResult, error) {
	req.done = make(chan checkInResult, 1)
	select {
	case s.checkIns <- req:
	case <-s.quit:
		return checkInResult{}, fmt.Errorf("the store is closed")
	case <-ctx.Done():
		return checkInResult{}, ctx.Err()
	}
	// Once handed over, the check-in is applied whatever happens to ctx:
	// waiting for it is short.
	return <-req.done, nil
}

// checkInLoop applies check-ins in batches until quit is closed.
func (s *Store) checkInLoop() {
	defer s.loops.Done()
	for {
		var first *checkInRequest
		select {
		case first = <-s.checkIns:
		case <-s.quit:
			return
		}
		batch := []*checkInRequest{first}
	drain:
		for len(batch) < maxCheckInBatch {
			select {
			case r := <-s.checkIns:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.applyCheckIns(batch)
	}
}

// applyCheckIns applies a batch in one transaction. Errors of one check-in
// (an unknown or removed agent) write nothing and stay with it; a database
// error fails the transaction, and the check-ins are then tried one by one.
func (s *Store) applyCheckIns(batch []*checkInRequest) {
	ctx := context.Background()
	results := make([]checkInResult, len(batch))
	err := s.write(ctx, func(tx querier) error {
		rings, err := findRings(ctx, tx)
		if err != nil {
			return err
		}
		for i, r := range batch {
			cmds, err := s.checkInTx(ctx, tx, rings, r)
			if err != nil && errs.StatusOf(err) == 500 {
				return err
			}
			results[i] = checkInResult{cmds, err}
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			s.applyCheckIns([]*checkInRequest{r})
		}
		return
	}
	for i, r := range batch {
		if err != nil {
			results[i] = checkInResult{err: err}
		}
		r.done <- results[i]
	}
}
