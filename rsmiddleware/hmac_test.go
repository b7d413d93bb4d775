package rsmiddleware

import (
	"crypto/hmac"
	"crypto/sha256"
)

func hmacSHA256(key []byte, input string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return m.Sum(nil)
}
