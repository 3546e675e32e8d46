package conf

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"

	"github.com/BurntSushi/toml"
)

var durationType = reflect.TypeOf(Duration{})

// valueProblem is a value of the wrong type or form.
type valueProblem struct {
	key  toml.Key // dotted key without array indices, as the toml library knows it
	path string   // the key with array indices, as error messages print it
	msg  string
	// at is what drop removes: path, or the whole array when path is one
	// of its elements.
	at string
	// drop removes the value from the generically decoded document, so
	// that the rest of the document can still be decoded and checked.
	drop func()
}

// holder is where a value sits in the generically decoded document: the
// path of the table key holding it and a func that deletes that key.
type holder struct {
	path string
	drop func()
}

// checkValues walks the generically decoded document along the schema and
// reports every value of the wrong TOML type, and every duration that does
// not parse, one line each naming the key. It does this before the typed
// decode, which stops at the first problem and names neither array indices
// nor, for a type mismatch, the problem in a DBA's words. Values are not
// repeated in type errors, since a misplaced value may be a password. Keys
// outside the schema are left to unknownKeys.
//
// The problems come back as errors, in file order, and as the values they
// are about; the caller drops those from raw to decode the rest.
func checkValues(text string, md *toml.MetaData, raw map[string]any) ([]error, []valueProblem) {
	var found []valueProblem
	checkTable(raw, reflect.TypeOf(Config{}), nil, "", &found)
	if len(found) == 0 {
		return nil, nil
	}
	// Maps are walked in random order; report in file order.
	index := newKeyIndex(md)
	slices.SortFunc(found, func(a, b valueProblem) int {
		return cmp.Or(
			cmp.Compare(index.first[a.key.String()], index.first[b.key.String()]),
			cmp.Compare(a.path, b.path))
	})
	var errs []error
	for n, p := range found {
		if n == maxReported {
			errs = append(errs, tooMany(len(found)-n, "bad values"))
			break
		}
		e := &lineError{msg: p.path + ": " + p.msg}
		if index.count[p.key.String()] == 1 {
			e.line = keyLine(text, raw, p.key)
		}
		errs = append(errs, e)
	}
	return errs, found
}

// checkTable checks the keys of table m against struct type t.
func checkTable(m map[string]any, t reflect.Type, key toml.Key, path string, found *[]valueProblem) {
	for k, v := range m {
		f, ok := fieldByKey(t, k)
		if !ok {
			continue
		}
		sub := append(key[:len(key):len(key)], k)
		subPath := toml.Key{k}.String()
		if path != "" {
			subPath = path + "." + subPath
		}
		h := holder{path: subPath, drop: func() { delete(m, k) }}
		checkValue(v, f.Type, sub, subPath, h, found)
	}
}

// checkValue checks one value against the Go type it decodes into.
func checkValue(v any, t reflect.Type, key toml.Key, path string, h holder, found *[]valueProblem) {
	bad := func(msg string) {
		*found = append(*found, valueProblem{key: key, path: path, msg: msg, at: h.path, drop: h.drop})
	}
	mismatch := func() {
		bad(fmt.Sprintf("want %s, got %s", describeType(t), describeValue(v)))
	}
	switch {
	case t == durationType:
		s, ok := v.(string)
		if !ok {
			mismatch()
		} else if err := new(Duration).UnmarshalText([]byte(s)); err != nil {
			bad(err.Error())
		}
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			mismatch()
			return
		}
		checkTable(m, t, key, path, found)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		elems, ok := asTables(v)
		if _, table := v.(map[string]any); table {
			bad(fmt.Sprintf("want an array of tables, got a table (write [[%s]], not [%s])", key, key))
			return
		} else if !ok {
			mismatch()
			return
		}
		for i, e := range elems {
			checkTable(e, t.Elem(), key, fmt.Sprintf("%s[%d]", path, i), found)
		}
	case t.Kind() == reflect.Slice:
		elems, ok := v.([]any)
		if !ok {
			mismatch()
			return
		}
		for i, e := range elems {
			checkValue(e, t.Elem(), key, fmt.Sprintf("%s[%d]", path, i), h, found)
		}
	case t.Kind() == reflect.String:
		if _, ok := v.(string); !ok {
			mismatch()
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if _, ok := v.(int64); !ok {
			mismatch()
		}
	case t.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			mismatch()
		}
	}
}

// asTables returns the elements of an array of tables, written either as
// [[key]] sections or as an inline array of tables.
func asTables(v any) ([]map[string]any, bool) {
	switch v := v.(type) {
	case []map[string]any:
		return v, true
	case []any:
		out := make([]map[string]any, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// describeType names what a value decoding into t must be.
func describeType(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration string such as "5s"`
	case t.Kind() == reflect.Struct:
		return "a table"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "an array of tables"
	case t.Kind() == reflect.Slice:
		return "an array of " + plural(describeType(t.Elem()))
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "an integer"
	case t.Kind() == reflect.Bool:
		return "true or false"
	}
	return t.String()
}

// plural turns "a string" into "strings" and "an integer" into "integers".
func plural(s string) string {
	for _, article := range []string{"a ", "an "} {
		if len(s) > len(article) && s[:len(article)] == article {
			return s[len(article):] + "s"
		}
	}
	return s
}

// describeValue names the TOML type of a generically decoded value.
func describeValue(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	}
	return "a date or time"
}
