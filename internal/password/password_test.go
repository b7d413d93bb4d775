package password

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestHashThenCheck(t *testing.T) {
	h, err := Hash("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=1,p=2$") {
		t.Fatalf("unexpected PHC prefix: %s", h)
	}
	h2, err := Hash("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt is not random")
	}
	for _, tc := range []struct {
		name string
		pw   string
		want bool
	}{
		{"accepts the right password", "correct horse battery staple", true},
		{"rejects a wrong password", "correct horse battery stapl", false},
		{"rejects the empty password", "", false},
		{"rejects a different case", "Correct horse battery staple", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := Check(h, tc.pw)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.want {
				t.Fatalf("Check = %v, want %v", ok, tc.want)
			}
		})
	}
	if NeedsRehash(h) {
		t.Error("a fresh hash needs rehash")
	}
	if err := Validate(h); err != nil {
		t.Errorf("Validate(fresh hash) = %v", err)
	}
}

func TestCheckBcrypt(t *testing.T) {
	b, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// $2a$, $2b$ and $2y$ are the same algorithm with different bug-fix markers.
	for _, prefix := range []string{"$2a$", "$2b$", "$2y$"} {
		h := prefix + string(b[4:])
		t.Run("accepts "+prefix, func(t *testing.T) {
			ok, err := Check(h, "s3cret")
			if err != nil || !ok {
				t.Fatalf("Check(right) = %v, %v", ok, err)
			}
			ok, err = Check(h, "s3creT")
			if err != nil || ok {
				t.Fatalf("Check(wrong) = %v, %v", ok, err)
			}
			if err := Validate(h); err != nil {
				t.Fatalf("Validate = %v", err)
			}
		})
	}
	if !NeedsRehash(string(b)) {
		t.Error("a bcrypt hash does not need rehash")
	}
}

func TestCheckRejectsMalformedHashes(t *testing.T) {
	for _, tc := range []struct {
		name, hash string
	}{
		{"rejects the empty string", ""},
		{"rejects a plain-text password", "hunter2"},
		{"rejects argon2i", "$argon2i$v=19$m=65536,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects a wrong version", "$argon2id$v=16$m=65536,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects missing parameters", "$argon2id$v=19$m=65536,t=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects parameters out of order", "$argon2id$v=19$t=2,m=65536,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects zero iterations", "$argon2id$v=19$m=65536,t=0,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects a huge memory cost", "$argon2id$v=19$m=4294967295,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects a huge time cost", "$argon2id$v=19$m=65536,t=1000000,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects too many lanes", "$argon2id$v=19$m=65536,t=2,p=256$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects a negative number", "$argon2id$v=19$m=-1,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects a short salt", "$argon2id$v=19$m=65536,t=2,p=2$c2FsdA$aGFzaGhhc2hoYXNoaGFzaA"},
		{"rejects bad base64 in the hash", "$argon2id$v=19$m=65536,t=2,p=2$c2FsdHNhbHRzYWx0$!!!!"},
		{"rejects padded base64", "$argon2id$v=19$m=65536,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA=="},
		{"rejects a trailing field", "$argon2id$v=19$m=65536,t=2,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA$x"},
		{"rejects a truncated bcrypt hash", "$2b$10$abc"},
		{"rejects bcrypt with an absurd cost", "$2b$99$" + strings.Repeat("a", 53)},
		{"rejects an overlong string", "$argon2id$" + strings.Repeat("a", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := Check(tc.hash, "pw")
			if ok {
				t.Fatal("Check accepted a malformed hash")
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if err := Validate(tc.hash); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Validate = %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", "pw")
	f.Add("$2b$04$abcdefghijklmnopqrstuu5zVYvTUQ0EelAA7B.pTW8rC7YQTdKy6", "pw")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, hash, pw string) {
		// Keep the fuzzer from spending its time in legitimately slow hashes.
		if p, err := parseArgon2id(hash); err == nil && (p.memory > 1024 || p.time > 2) {
			t.Skip()
		}
		if strings.HasPrefix(hash, "$2") && len(hash) > 6 && hash[4:6] > "06" {
			t.Skip()
		}
		ok, err := Check(hash, pw)
		if ok && err != nil {
			t.Fatal("ok with an error")
		}
		if verr := Validate(hash); (verr == nil) != (err == nil) {
			t.Fatalf("Validate = %v but Check = %v", verr, err)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	argon, err := Hash("benchmark password")
	if err != nil {
		b.Fatal(err)
	}
	bc, err := bcrypt.GenerateFromPassword([]byte("benchmark password"), 10)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("argon2id m=64MiB t=1 p=2", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := Check(argon, "benchmark password"); !ok {
				b.Fatal("mismatch")
			}
		}
	})
	b.Run("bcrypt cost 10", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := Check(string(bc), "benchmark password"); !ok {
				b.Fatal("mismatch")
			}
		}
	})
}

func TestWeakHashesAreNamed(t *testing.T) {
	strong, err := Hash("pw")
	if err != nil {
		t.Fatal(err)
	}
	bcryptAt := func(cost int) string {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	for _, tc := range []struct {
		name string
		hash string
		weak bool
	}{
		{"our own argon2id hash is strong", strong, false},
		{"bcrypt at cost 10 is strong", bcryptAt(10), false},
		{"bcrypt at cost 4 is weak", bcryptAt(bcrypt.MinCost), true},
		{"bcrypt at cost 9 is weak", bcryptAt(9), true},
		{"argon2id with 8 MiB is weak", "$argon2id$v=19$m=8192,t=3,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43), true},
		{"argon2id with 19 MiB and two passes is strong", "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43), false},
		{"garbage is not called weak (Validate refuses it)", "nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Weak(tc.hash); got != tc.weak {
				t.Errorf("Weak = %v, want %v", got, tc.weak)
			}
		})
	}
}
