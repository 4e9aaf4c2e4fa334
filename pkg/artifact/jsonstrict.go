package artifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// The helpers below implement the closed-schema rules of the directory:
// exact member sets, no duplicates, no nulls, exact JSON types, and integers
// written as plain non-negative decimal literals.

// jsonObject is a decoded JSON object: its members in document order.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject decodes raw as a JSON object, rejecting duplicate keys.
func parseObject(raw json.RawMessage) (*jsonObject, error) {
	if kindOf(raw) != '{' {
		return nil, fmt.Errorf("want an object, got %s", typeName(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	o := &jsonObject{vals: map[string]json.RawMessage{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[k]; dup {
			return nil, fmt.Errorf("duplicate member %s", termsafe.Quote(k))
		}
		o.keys = append(o.keys, k)
		o.vals[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

// exact checks that o has every required member, only allowed (required or
// optional) members, and no null values.
func (o *jsonObject) exact(required, optional []string) error {
	allowed := map[string]bool{}
	for _, k := range required {
		allowed[k] = true
		if _, ok := o.vals[k]; !ok {
			return fmt.Errorf("missing member %q", k)
		}
	}
	for _, k := range optional {
		allowed[k] = true
	}
	for _, k := range o.keys {
		if !allowed[k] {
			return fmt.Errorf("unexpected member %s", termsafe.Quote(k))
		}
		if kindOf(o.vals[k]) == 'n' {
			return fmt.Errorf("member %q is null", k)
		}
	}
	return nil
}

func (o *jsonObject) has(k string) bool { _, ok := o.vals[k]; return ok }

func (o *jsonObject) str(k string) (string, error) { return asString(k, o.vals[k]) }

func (o *jsonObject) uint(k string) (int64, error) { return asUint(k, o.vals[k]) }

// kindOf returns the first significant byte of a JSON value: '{', '[', '"',
// 't'/'f' (booleans), 'n' (null), or '0' for numbers.
func kindOf(raw json.RawMessage) byte {
	b := bytes.TrimLeft(raw, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	switch c := b[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	case '-':
		return '0'
	default:
		if c >= '0' && c <= '9' {
			return '0'
		}
		return 0
	}
}

func typeName(raw json.RawMessage) string {
	switch kindOf(raw) {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '0':
		return "the number " + string(bytes.TrimSpace(raw))
	}
	return "invalid JSON"
}

func asString(name string, raw json.RawMessage) (string, error) {
	if kindOf(raw) != '"' {
		return "", fmt.Errorf("%s must be a string, got %s", name, typeName(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// numberText is a raw JSON value (usually a number literal) for a message:
// as written when it is short and holds no control byte (a number literal
// never does), else quoted and cut to an excerpt (termsafe.QuoteBytes): an
// array or object value may span lines.
func numberText(b []byte) string {
	if len(b) > termsafe.MaxExcerpt {
		return termsafe.QuoteBytes(b)
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return termsafe.QuoteBytes(b)
		}
	}
	return string(b)
}

// asUint parses a non-negative integer written as a plain decimal literal
// (no sign, fraction or exponent) that fits in int64.
func asUint(name string, raw json.RawMessage) (int64, error) {
	b := bytes.TrimSpace(raw)
	if kindOf(b) != '0' {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %s", name, typeName(raw))
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s must be a non-negative integer, got %s", name, numberText(b))
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %s", name, numberText(b))
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%s %s is out of range", name, numberText(b))
	}
	return int64(v), nil
}

// asArray splits a JSON array into its elements.
func asArray(name string, raw json.RawMessage) ([]json.RawMessage, error) {
	if kindOf(raw) != '[' {
		return nil, fmt.Errorf("%s must be an array, got %s", name, typeName(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// asShape parses an array of positive integers.
func asShape(raw json.RawMessage) ([]int64, error) {
	elems, err := asArray("shape", raw)
	if err != nil {
		return nil, err
	}
	shape := make([]int64, len(elems))
	for i, e := range elems {
		d, err := asUint(fmt.Sprintf("shape[%d]", i), e)
		if err != nil {
			return nil, err
		}
		if d == 0 {
			return nil, fmt.Errorf("shape[%d] must be positive, got 0", i)
		}
		shape[i] = d
	}
	return shape, nil
}

// decodeFreeObject decodes a free-form JSON object (metadata, provenance),
// keeping numbers as json.Number.
func decodeFreeObject(name string, raw json.RawMessage) (map[string]any, error) {
	if kindOf(raw) != '{' {
		return nil, fmt.Errorf("%s must be an object, got %s", name, typeName(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}
