package catalog

import (
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// ListPlan is a list query checked and resolved: its sort column, page
// size and the engine's query of its search. The summary index
// (summarylist.go) answers it.
type ListPlan struct {
	SortKey string
	Col     string // sort column
	Desc    bool
	Limit   int
	// Match is the engine's full-text query of the search, "" without one.
	Match string
	// Empty says that no record can match.
	Empty bool
}

// NewListPlan returns the plan of q, its search made the engine's query by
// search (which returns "" when nothing can match). It returns
// errs.ErrInvalid as ListOrder does and for a search of too many words.
func NewListPlan(q cve.ListQuery, search func(text string) (string, error)) (*ListPlan, error) {
	p := &ListPlan{Desc: q.Desc}
	var err error
	if p.SortKey, p.Col, p.Limit, err = ListOrder(q); err != nil {
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
