package sqlite

import (
	"context"
	"strings"

	"github.com/patchline/patchline/internal/catalog"
)

// searchKeys returns the keys of the records that match an FTS5 query.
func (d *DB) searchKeys(ctx context.Context, match string) ([]int64, error) {
	return catalog.QueryKeys(ctx, d.db.Read, `SELECT rowid FROM records_fts WHERE records_fts MATCH ?`, match)
}

// ftsQuery turns free text into an FTS5 query that matches rows holding
// every word of it, the last word also as a prefix, as a search box does
// ("log4j" finds "log4j2", "CVE-2021-4422" finds CVE-2021-44228): each
// word becomes a quoted string, so that no character the user types is read
// as FTS5 query syntax. Words without a letter or a digit are dropped (the
// tokenizer would find nothing in them); an empty result means nothing can
// match.
func ftsQuery(text string) (string, error) {
	words, err := catalog.SearchWords(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(w, `"`, `""`))
		b.WriteByte('"')
		if i == len(words)-1 && lastTokenLen(w) >= minPrefix {
			b.WriteByte('*')
		}
	}
	return b.String(), nil
}

// minPrefix is the length from which the last token of a word also
// matches as a prefix: shorter prefixes match too much to be useful.
const minPrefix = 3

// lastTokenLen returns the number of letters and digits at the end of the
// last token of w.
func lastTokenLen(w string) int {
	n := 0
	rs := []rune(w)
	i := len(rs) - 1
	for i >= 0 && !catalog.IsTokenRune(rs[i]) {
		i--
	}
	for ; i >= 0 && catalog.IsTokenRune(rs[i]); i-- {
		n++
	}
	return n
}
