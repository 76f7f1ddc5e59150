package login

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// matchedFor is how long a secret that matched its hash is remembered,
// and maxMatched how many hashes' are at most (the least recently used
// forgotten first).
const (
	matchedFor = time.Minute
	maxMatched = 4096
)

// matched remembers, for matchedFor, the secret that last matched each
// hash, as an HMAC under a key that lives only in this process's memory:
// a crowd of one right secret (a branch's kiosks signing in together, a
// patron's PIN at several kiosks) costs one argon2 hash, not one each. A
// secret that does not match what is remembered is hashed as every
// secret is, so a wrong one always costs the hash and takes its time;
// only a right one may answer sooner, which its success says anyway. A
// new password or PIN is a new hash (its salt is new), which nothing
// remembered matches.
type matched struct {
	key    []byte
	hashes *expirable.LRU[string, []byte]
}

func newMatched() *matched {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return &matched{key: key, hashes: expirable.NewLRU[string, []byte](maxMatched, nil, matchedFor)}
}

func (m *matched) mac(hash, secret string) []byte {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(hash))
	h.Write([]byte{0})
	h.Write([]byte(secret))
	return h.Sum(nil)
}

// holds says whether secret is the one remembered as matching hash.
func (m *matched) holds(hash, secret string) bool {
	want, ok := m.hashes.Get(hash)
	return ok && hmac.Equal(m.mac(hash, secret), want)
}

// remember keeps secret as the one that matched hash.
func (m *matched) remember(hash, secret string) { m.hashes.Add(hash, m.mac(hash, secret)) }
