// Package audit defines the System Audit log of the control service: an
// append-only list of entries, one per API-key request and per
// administrative action, each chained to the one before it by a hash so that
// a changed, removed or reordered entry is detected by Verify.
//
// The hash of an entry is
//
//	SHA-256("patchline-audit-v1\n" ‖ prevHash ‖ canonical(entry))
//
// where prevHash is the hash of the previous entry (32 zero bytes for the
// first) and canonical is a length-prefixed encoding of every field of the
// entry in a fixed order (see Entry.ComputeHash). The chain cannot tell that
// entries were cut off its end; Verify reports the head hash and the count
// so that they can be compared with a copy kept elsewhere.
//
// What happened is a typed Event, each type with a name; Events lists them
// all, and the documentation and the tests come from that list.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Entry is one entry of the audit log.
type Entry struct {
	ID            int64           // 1, 2, 3 … without gaps
	Time          time.Time       // millisecond precision, UTC
	Actor         string          // who: "key:<keyId>", "admin:<email>", "cli:<user>", "agent:<id>" or "anonymous"
	KeyID         string          // the API key of the request, when one was presented (even a bad one)
	Action        string          // the name of the event, see Events
	Method        string          // HTTP method of a request, "" for other actions
	Path          string          // HTTP path of a request
	Status        int             // HTTP status of a request, 0 for other actions
	ClientAddress string          // address of the client
	Details       json.RawMessage // JSON of the event, nil when it has no fields
	PrevHash      []byte          // hash of the previous entry
	Hash          []byte          // hash of this entry, see ComputeHash
}

// SetEvent sets Action and Details from ev.
func (e *Entry) SetEvent(ev Event) error {
	e.Action = ev.Action()
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Action, err)
	}
	if string(b) == "{}" || string(b) == "null" {
		b = nil
	}
	e.Details = b
	return nil
}

// hashDomain separates the hashes of this format from any other SHA-256.
const hashDomain = "patchline-audit-v1\n"

// GenesisHash is the PrevHash of the first entry.
var GenesisHash = make([]byte, sha256.Size)

// ComputeHash returns the hash of e chained to prev. Every field but Hash
// takes part, ID and PrevHash included, so an entry cannot be moved.
func (e *Entry) ComputeHash(prev []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(hashDomain)
	buf.Write(prev)
	putUint := func(v uint64) { buf.Write(binary.BigEndian.AppendUint64(nil, v)) }
	putBytes := func(b []byte) {
		buf.Write(binary.AppendUvarint(nil, uint64(len(b))))
		buf.Write(b)
	}
	putUint(uint64(e.ID))
	putUint(uint64(e.Time.UnixMilli()))
	putBytes([]byte(e.Actor))
	putBytes([]byte(e.KeyID))
	putBytes([]byte(e.Action))
	putBytes([]byte(e.Method))
	putBytes([]byte(e.Path))
	putUint(uint64(e.Status))
	putBytes([]byte(e.ClientAddress))
	putBytes(e.Details)
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

// Chain fills in ID, PrevHash and Hash of e to follow an entry with the
// given id and hash (0 and GenesisHash for the first entry), and truncates
// its time to what the log keeps.
func (e *Entry) Chain(prevID int64, prevHash []byte) {
	e.ID = prevID + 1
	e.Time = e.Time.UTC().Truncate(time.Millisecond)
	e.PrevHash = append([]byte(nil), prevHash...)
	e.Hash = e.ComputeHash(prevHash)
}

// Filter selects entries of the log, newest first. Zero values mean "no
// filter".
type Filter struct {
	KeyID  string
	Action string
	// Before, when non-zero, selects entries with a smaller ID: the keyset
	// cursor of the list.
	Before int64
	Limit  int // at most this many; 0 means no limit
}

// Log is the audit log. Implementations keep it append-only.
type Log interface {
	// AppendAudit chains e to the last entry (see Entry.Chain) and appends
	// it, atomically with respect to other appends, filling in ID, PrevHash
	// and Hash.
	AppendAudit(ctx context.Context, e *Entry) error

	// FindAuditEntries returns the entries matching f, newest first.
	FindAuditEntries(ctx context.Context, f Filter) ([]*Entry, error)

	// WalkAudit calls fn for every entry in chain order, oldest first, until
	// fn returns an error, which WalkAudit returns.
	WalkAudit(ctx context.Context, fn func(*Entry) error) error
}

// BrokenLinkError names the first entry at which the chain does not hold.
type BrokenLinkError struct {
	ID     int64  // the entry, or the ID expected where one is missing
	Reason string // what does not hold
}

// Error implements error.
func (e *BrokenLinkError) Error() string {
	return fmt.Sprintf("audit entry %d: %s", e.ID, e.Reason)
}

// Verifier checks entries one after the other, oldest first.
type Verifier struct {
	prevID   int64
	prevHash []byte
	count    int
}

// Check checks that e follows the entries checked before. It returns a
// *BrokenLinkError at the first entry that does not.
func (v *Verifier) Check(e *Entry) error {
	if v.prevHash == nil {
		v.prevHash = GenesisHash
	}
	switch {
	case e.ID != v.prevID+1:
		return &BrokenLinkError{ID: v.prevID + 1, Reason: fmt.Sprintf("missing: entry %d follows entry %d", e.ID, v.prevID)}
	case !bytes.Equal(e.PrevHash, v.prevHash):
		return &BrokenLinkError{ID: e.ID, Reason: fmt.Sprintf("prevHash %s is not the hash %s of entry %d", short(e.PrevHash), short(v.prevHash), v.prevID)}
	case !bytes.Equal(e.ComputeHash(e.PrevHash), e.Hash):
		return &BrokenLinkError{ID: e.ID, Reason: "contents do not match its hash: the entry was changed"}
	}
	v.prevID, v.prevHash = e.ID, e.Hash
	v.count++
	return nil
}

// Count returns the number of entries checked so far.
func (v *Verifier) Count() int { return v.count }

// Head returns the hash of the last entry checked, GenesisHash before any.
func (v *Verifier) Head() []byte {
	if v.prevHash == nil {
		return GenesisHash
	}
	return v.prevHash
}

// Result is the outcome of Verify.
type Result struct {
	Entries int              // entries that verified
	Head    []byte           // hash of the last entry that verified
	Broken  *BrokenLinkError // the first broken link, nil when the chain holds
}

// Verify walks the whole log and checks its chain. A broken chain is
// reported in Result.Broken; the error is for failures to read the log.
func Verify(ctx context.Context, log Log) (Result, error) {
	var v Verifier
	err := log.WalkAudit(ctx, v.Check)
	res := Result{Entries: v.Count(), Head: v.Head()}
	var broken *BrokenLinkError
	if errors.As(err, &broken) {
		res.Broken = broken
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("walk audit log: %w", err)
	}
	return res, nil
}

func short(h []byte) string {
	s := hex.EncodeToString(h)
	if len(s) > 12 {
		s = s[:12] + "…"
	}
	return s
}
