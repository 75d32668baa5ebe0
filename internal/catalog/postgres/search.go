package postgres

import (
	"context"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/patchline/patchline/internal/catalog"
)

// The words of the full-text search are cut and folded here rather than by
// PostgreSQL's text search parser, which reads "CVE-2021-44228" as the
// words cve, -2021 and -44228 and keeps "1.2.3" and e-mail addresses whole.
// A word is a run of letters and digits, folded to lower case without
// diacritics, as the unicode61 tokenizer of the SQLite store cuts and folds
// it, so that both stores find the same records. The stored tsvector and
// the tsquery are written in their input syntax, which takes lexemes as
// they are.

// searchKeys returns the keys of the listed records that match a tsquery.
func (d *DB) searchKeys(ctx context.Context, match string) ([]int64, error) {
	return catalog.QueryKeys(ctx, d.SQLReads.DB, searchKeysQuery, match)
}

// searchKeysQuery selects them through the partial GIN index on search,
// whose condition it repeats.
const searchKeysQuery = `SELECT key FROM records WHERE search @@ $1::tsquery AND NOT rejected`

// minPrefix is the length from which the last token of a search also
// matches as a prefix: shorter prefixes match too much to be useful.
const minPrefix = 3

// maxLexemeBytes is the longest lexeme a tsvector holds.
const maxLexemeBytes = 2046

// maxPosition is the largest position a tsvector records; PostgreSQL sets
// larger ones to it.
const maxPosition = 16383

// tokens returns the folded tokens of text in order.
func tokens(text string) []string {
	fields := strings.FieldsFunc(text, func(r rune) bool { return !catalog.IsTokenRune(r) })
	for i, f := range fields {
		fields[i] = fold(f)
	}
	return fields
}

// fold lowers the case of a token and removes its diacritics.
func fold(tok string) string {
	tok = strings.ToLower(tok)
	ascii := true
	for i := 0; i < len(tok); i++ {
		if tok[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return tok
	}
	var b strings.Builder
	for _, r := range norm.NFD.String(tok) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return norm.NFC.String(b.String())
}

// quoteLexeme writes tok as a quoted lexeme of tsvector and tsquery input.
func quoteLexeme(b *strings.Builder, tok string) {
	b.WriteByte('\'')
	for _, r := range tok {
		switch r {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
}

// searchVector returns the tsvector, in its input syntax, that indexes a
// record for search: the tokens of its id, then those of its description
// one position further on, so that no phrase spans the two. Tokens too long
// for a lexeme are left out.
func searchVector(id, description string) string {
	var b strings.Builder
	pos := 0
	add := func(text string) {
		for _, tok := range tokens(text) {
			pos++
			if len(tok) > maxLexemeBytes {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			quoteLexeme(&b, tok)
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(min(pos, maxPosition)))
		}
	}
	add(id)
	pos++
	add(description)
	return b.String()
}

// searchQuery turns free text into a tsquery, in its input syntax, that
// matches records holding every word of it, the last word also as a
// prefix, as a search box does ("log4j" finds "log4j2", "CVE-2021-4422"
// finds CVE-2021-44228). A word of several tokens is a phrase: its tokens
// must follow each other. Nothing the user types is read as tsquery syntax:
// only tokens of letters and digits reach the query, each quoted. Words
// without a letter or a digit are dropped; an empty result means nothing
// can match. It returns errs.ErrInvalid for more than catalog.MaxSearchTerms words.
func searchQuery(text string) (string, error) {
	words, err := catalog.SearchWords(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, w := range words {
		toks := tokens(w)
		if i > 0 {
			b.WriteString(" & ")
		}
		if len(toks) > 1 {
			b.WriteByte('(')
		}
		for j, tok := range toks {
			if len(tok) > maxLexemeBytes {
				return "", nil // no stored lexeme is that long
			}
			if j > 0 {
				b.WriteString(" <-> ")
			}
			quoteLexeme(&b, tok)
			if i == len(words)-1 && j == len(toks)-1 && len([]rune(tok)) >= minPrefix {
				b.WriteString(":*")
			}
		}
		if len(toks) > 1 {
			b.WriteByte(')')
		}
	}
	return b.String(), nil
}
