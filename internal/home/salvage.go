package home

import "encoding/json"

// SalvageEntries reads a JSON object from dec, entry by entry, and passes
// each entry whose value decodes as a T to keep, stopping at the first one
// that does not: what a damaged state file still holds before the damage.
// It reports whether the object was read to its end.
func SalvageEntries[T any](dec *json.Decoder, keep func(key string, v T)) bool {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return false
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return false
		}
		keep(key, v)
	}
	_, err := dec.Token() // the closing '}'
	return err == nil
}
