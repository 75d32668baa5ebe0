package catalog

import (
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// listPlan is a list query checked and resolved: its sort column, page
// size and the engine's query of its search. The summary index
// (summarylist.go) answers it.
type listPlan struct {
	SortKey string
	Col     string // sort column
	Desc    bool
	Limit   int
	// Match is the engine's full-text query of the search, "" without one.
	Match string
	// Empty says that no record can match.
	Empty bool
}

// newListPlan returns the plan of q, its search made the engine's query by
// search (which returns "" when nothing can match). It returns
// errs.ErrInvalid as listOrder does and for a search of too many words.
func newListPlan(q cve.ListQuery, search func(text string) (string, error)) (*listPlan, error) {
	p := &listPlan{Desc: q.Desc}
	var err error
	if p.SortKey, p.Col, p.Limit, err = listOrder(q); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q.Q) != "" {
		if p.Match, err = search(q.Q); err != nil {
			return nil, err
		}
		p.Empty = p.Match == ""
	}
	return p, nil
}
