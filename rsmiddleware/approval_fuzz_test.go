package rsmiddleware

import (
	"encoding/json"
	"testing"
)

// hasDuplicateByMaps is duplicateKeys computed another way: an object
// decoded into a map has fewer members than objectFields counts when a
// name repeats.
func hasDuplicateByMaps(v []byte) bool {
	t := trimJSONSpace(v)
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(t, &m) != nil {
			return false
		}
		n, dup := 0, false
		_ = objectFields(t, func(_, val []byte) error {
			n++
			dup = dup || hasDuplicateByMaps(val)
			return nil
		})
		return dup || n != len(m)
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(t, &a) != nil {
			return false
		}
		for _, e := range a {
			if hasDuplicateByMaps(e) {
				return true
			}
		}
	}
	return false
}

// FuzzApprovalArguments: for the arguments of any tools/call, the checks
// of approvalArgsProblem never panic, find a repeated name exactly when
// one is there, and pass only arguments with a canonical form.
func FuzzApprovalArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":1}]}}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":"\\ud800"}`, `{"\u0061":1,"a":2}`, `["x"]`, "{\"a\":\"\xff\"}", `{"a":"\udc00\ud800"}`, `{"k":"\"\\u"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		if !json.Valid(args) {
			return
		}
		why := approvalArgsProblem(args)
		tt := trimJSONSpace(args)
		if len(tt) > 0 && tt[0] == '{' {
			if got, want := duplicateKeys(tt), hasDuplicateByMaps(tt); got != want {
				t.Fatalf("duplicateKeys(%q) = %v, by maps %v", args, got, want)
			}
		}
		if why == "" && len(tt) > 0 && string(tt) != "null" {
			if _, err := CanonicalJSON(tt); err != nil {
				t.Fatalf("%q passed but has no canonical form: %v", args, err)
			}
		}
	})
}
