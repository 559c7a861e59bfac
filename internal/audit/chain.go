package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"strconv"
	"time"
)

// The hash chain (docs/audit.md). Every line the Logger writes ends in
//
//	,"seq":N[,"prev":"<64 hex>"],"hash":"<64 hex>"}
//
// seq counts records from 1 across rotated files; prev, written on the first
// record of each file and on the records the Logger writes itself, is the
// hash of the record before (GenesisHash before the first). The canonical
// bytes of a line are the line without its newline and without its
// `,"hash":"…"` member (the `}` stays), and
//
//	hash = hex(SHA-256(hex hash of the record before ‖ canonical bytes))
//
// so a verifier needs no JSON parser: it checks the fixed-length tail.

// GenesisHash is the hash "before" the first record of a chain.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

const (
	hashKey = `,"hash":"`
	prevKey = `,"prev":"`
	seqKey  = `,"seq":`
	// hashTail is the length of `,"hash":"<64 hex>"}`.
	hashTail = len(hashKey) + 64 + 2
	// prevTail is the length of `,"prev":"<64 hex>"`.
	prevTail = len(prevKey) + 64 + 1
)

// Link is the chain part of a line.
type Link struct {
	Seq  int64
	Prev string // "" when the line does not carry one
	Hash string
}

// appendChain turns rec, one JSON object ending in '}', into a chained
// line (without its newline): it appends seq (and prev when withPrev) and
// the hash of it all chained to prevHash. It returns the line and its hash.
func appendChain(rec []byte, seq int64, prevHash string, withPrev bool) ([]byte, string) {
	var prev [64]byte
	copy(prev[:], prevHash)
	b := appendChainTo(rec, seq, &prev, withPrev, sha256.New())
	return b, string(prev[:])
}

// appendChainTo is appendChain with the hash before in *h, replaced by the
// line's, and d a SHA-256 digest to reuse.
func appendChainTo(rec []byte, seq int64, h *[64]byte, withPrev bool, d hash.Hash) []byte {
	b := rec[:len(rec)-1]
	b = append(b, seqKey...)
	b = strconv.AppendInt(b, seq, 10)
	if withPrev {
		b = append(b, prevKey...)
		b = append(b, h[:]...)
		b = append(b, '"')
	}
	b = append(b, '}')
	d.Reset()
	d.Write(h[:])
	d.Write(b)
	b = b[:len(b)-1]
	b = append(b, hashKey...)
	n := len(b)
	b = append(b, h[:]...) // room for the hex
	b = d.Sum(b)           // the raw sum after it, then hex over the room
	hex.Encode(b[n:n+64], b[n+64:])
	b = b[:n+64]
	copy(h[:], b[n:])
	return append(b, '"', '}')
}

// chainHash is hex(SHA-256(prevHash ‖ canonical)).
func chainHash(prevHash string, canonical []byte) string {
	d := sha256.New()
	d.Write([]byte(prevHash))
	d.Write(canonical)
	var sum [sha256.Size]byte
	return hex.EncodeToString(d.Sum(sum[:0]))
}

// lineHash is the hash a chained line (without newline) should carry when
// the record before it has hash prevHash.
func lineHash(prevHash string, line []byte) string {
	d := sha256.New()
	d.Write([]byte(prevHash))
	d.Write(line[:len(line)-hashTail])
	d.Write([]byte{'}'})
	var sum [sha256.Size]byte
	return hex.EncodeToString(d.Sum(sum[:0]))
}

var errNotChained = errors.New("not a chained audit record")

// ParseLink reads the chain part of one line (a trailing newline is
// allowed). It checks the form only, not the hash: see Verify.
func ParseLink(line []byte) (Link, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	n := len(line)
	if n < 1+len(seqKey)+1+hashTail || line[0] != '{' {
		return Link{}, errNotChained
	}
	tail := line[n-hashTail:]
	if string(tail[:len(hashKey)]) != hashKey || string(tail[hashTail-2:]) != `"}` || !isHex(tail[len(hashKey):hashTail-2]) {
		return Link{}, errNotChained
	}
	l := Link{Hash: string(tail[len(hashKey) : hashTail-2])}
	rest := line[:n-hashTail]
	if m := len(rest); m >= prevTail && rest[m-1] == '"' && string(rest[m-prevTail:m-prevTail+len(prevKey)]) == prevKey && isHex(rest[m-65:m-1]) {
		l.Prev = string(rest[m-65 : m-1])
		rest = rest[:m-prevTail]
	}
	i := bytes.LastIndex(rest, []byte(seqKey))
	if i < 0 {
		return Link{}, errNotChained
	}
	digits := rest[i+len(seqKey):]
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0') {
		return Link{}, errNotChained
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return Link{}, errNotChained
		}
	}
	l.Seq, _ = strconv.ParseInt(string(digits), 10, 64)
	return l, nil
}

func isHex(b []byte) bool {
	if len(b) != 64 {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Head is $BEIGE_HOME/data/audit-head: the newest record the Logger has
// written (and synced to disk) when it last wrote the head, so that a
// log cut short at its end is told from a whole one.
type Head struct {
	Seq  int64     `json:"seq"`
	Hash string    `json:"hash"`
	File string    `json:"file"` // the file the record was written to (its name then)
	Time time.Time `json:"time"` // when the head was written
}

// ReadHead reads a head file. A missing file is an error wrapping
// os.ErrNotExist.
func ReadHead(path string) (Head, error) {
	var h Head
	data, err := os.ReadFile(path)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("read %s: %w", path, err)
	}
	if h.Seq < 0 || (h.Seq > 0 && !isHex([]byte(h.Hash))) {
		return h, fmt.Errorf("read %s: not an audit head", path)
	}
	return h, nil
}
