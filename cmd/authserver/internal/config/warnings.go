package config

import (
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/mcpauth/mcpauth/internal/password"
)

// Warning is a setting that is accepted but weak. Path is the field path,
// as in errors.
type Warning struct {
	Path string
	Msg  string
}

func (w Warning) String() string { return w.Path + ": " + w.Msg }

// Warnings lists the weak settings of a validated configuration, for `serve`
// to log at start-up and `check-config` to print the same way:
//
//   - secret: key material of low entropy (few distinct bytes, a repeated
//     pattern, or under 80 bits by its own byte frequencies);
//   - issuer: plain http on a host that is not loopback (RFC 8414 §2 and
//     OAuth 2.1 §1.5 ask for TLS), or a loopback issuer on another port than
//     listen;
//   - users[i].password_hash: bcrypt below cost 10, argon2id below the OWASP
//     minimum (password.Weak);
//   - upstreams[i].allowed_domains: set for Microsoft Entra ID, whose ID
//     tokens carry no email_verified, so the rule admits nobody;
//   - upstreams[i].claim_scopes: no hd mapping for Google, whose issuer
//     signs in every Google account (the hd claim alone says that an
//     account belongs to a Workspace).
func (c *Config) Warnings() []Warning {
	var out []Warning
	if c.Secret != "" {
		if why := weakSecret(c.Secret); why != "" {
			out = append(out, Warning{"secret", "low-entropy key material (" + why + "): use 32 or more random bytes, for example `openssl rand -base64 32`"})
		}
	}
	if c.IssuerInsecure() {
		out = append(out, Warning{"issuer", "issuer is plain http on a non-loopback host: put TLS in front and use an https issuer"})
	}
	if w := c.issuerPortWarning(); w != "" {
		out = append(out, Warning{"issuer", w})
	}
	for i, u := range c.Users {
		if password.Weak(u.PasswordHash) {
			out = append(out, Warning{fmt.Sprintf("users[%d].password_hash", i),
				fmt.Sprintf("weak password hash for %q (bcrypt cost below %d or argon2id below the OWASP minimum of 19 MiB, or 46 MiB with one pass): rehash with `authserver hash-password`",
					u.Username, password.MinBcryptCost)})
		}
	}
	for i, u := range c.Upstreams {
		p := fmt.Sprintf("upstreams[%d].allowed_domains", i)
		switch host := upstreamHost(u.Issuer); {
		case host == "login.microsoftonline.com" && len(u.AllowedDomains) > 0:
			out = append(out, Warning{p, "Microsoft Entra ID sends no email_verified claim, so allowed_domains admits nobody: the tenant's issuer already limits sign-in to the tenant's people; use allowed_groups or claim_scopes"})
		case host == "accounts.google.com" && u.ClaimScopes["hd"] == nil:
			msg := "every Google account, of a Workspace or not, may sign in"
			if len(u.AllowedDomains) > 0 {
				msg = "a personal Google account whose verified email is at one of the domains may sign in"
			}
			out = append(out, Warning{fmt.Sprintf("upstreams[%d].claim_scopes", i), "no hd mapping: " + msg + "; Google asks relying parties to check the hd claim (the Workspace domain), so map it: claim_scopes: {hd: {example.com: [scopes]}}"})
		}
	}
	return out
}

// upstreamHost is the lower-case host of an issuer URL, "" when it has none.
func upstreamHost(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// Thresholds of weakSecret. A random 32-character hex string (128 bits)
// shows 14-16 distinct bytes (never fewer than 9 in 200000 tries) and about
// 115 bits by its byte frequencies (never under 88).
const (
	minSecretDistinct = 8
	minSecretBits     = 80
)

// weakSecret says why s looks like poor key material, or "" when it does
// not. It cannot prove randomness; it catches the usual mistakes: one byte
// repeated, a short word or pattern repeated, a handful of distinct bytes.
func weakSecret(s string) string {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	distinct := 0
	bits := 0.0
	for _, n := range counts {
		if n == 0 {
			continue
		}
		distinct++
		p := float64(n) / float64(len(s))
		bits -= float64(n) * math.Log2(p)
	}
	switch {
	case distinct < minSecretDistinct:
		return fmt.Sprintf("only %d distinct bytes", distinct)
	case period(s) > 0:
		return fmt.Sprintf("a %d-byte pattern repeated", period(s))
	case bits < minSecretBits:
		return fmt.Sprintf("about %.0f bits by its byte frequencies", bits)
	}
	return ""
}

// period returns the length of the shortest p <= len(s)/2 such that s
// repeats its first p bytes (s[i] == s[i-p] for all i >= p), or 0.
func period(s string) int {
	for p := 1; p <= len(s)/2; p++ {
		ok := true
		for i := p; i < len(s); i++ {
			if s[i] != s[i-p] {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
	}
	return 0
}
