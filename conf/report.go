package conf

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// errorList is every problem found in one configuration file, one per line,
// in file order: problems at a known line first, by line, then the others in
// the order they were found. Load sets file, which then starts every line,
// so that each line reads "file: line N: key: message" on its own.
type errorList struct {
	file string
	errs []error
}

func (l *errorList) Error() string {
	var b strings.Builder
	for i, e := range l.errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		if l.file != "" {
			b.WriteString(l.file + ": ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap gives errors.Is and errors.As every problem.
func (l *errorList) Unwrap() []error { return l.errs }

// sortByLine orders errs for errorList: those with a line by line, the
// others after them, each group keeping its order.
func sortByLine(errs []error) []error {
	line := func(e error) int {
		var le *lineError
		if errors.As(e, &le) && le.line > 0 {
			return le.line
		}
		return int(^uint(0) >> 1)
	}
	slices.SortStableFunc(errs, func(a, b error) int { return line(a) - line(b) })
	return errs
}

// unjoin splits an error made by errors.Join into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// maxPlaced bounds the problems found after decoding that are given a line:
// each costs up to a decode of the whole file per part of its key, and a
// file with more problems than this needs rewriting more than line numbers.
const maxPlaced = 50

// placeProblems gives each problem found after decoding (secrets and
// validation) the line of the key it names, where the toml library can tell
// it, and leaves out those about a value at or under one of the paths in
// dropped, which were reported already as values of the wrong type.
func placeProblems(text string, raw map[string]any, problems []error, dropped []string) []error {
	out := make([]error, 0, len(problems))
	for _, p := range problems {
		msg := p.Error()
		path := messagePath(msg)
		if slices.ContainsFunc(dropped, func(d string) bool { return under(path, d) }) {
			continue
		}
		e := &lineError{msg: msg, err: p}
		if len(out) < maxPlaced {
			e.line = pathLine(text, raw, path)
		}
		out = append(out, e)
	}
	return out
}

// under reports whether path is key or lies inside it.
func under(path, key string) bool {
	return path == key || strings.HasPrefix(path, key+".") || strings.HasPrefix(path, key+"[")
}

// messagePath returns the key a problem found by Validate or resolveSecrets
// is about, with array indices, such as cluster[0].replica[1].weight. Their
// messages start with the key: either whole ("proxy.listen: ...",
// "health.timeout must be ..."), or as the label of an array element and
// the key inside it ("cluster[0] (\"main\"): master is required",
// "limits.user[1]: burst must be ..."). A message that starts otherwise gives
// a path that names nothing in the document, and so no line.
func messagePath(msg string) string {
	path := leadingKey(msg)
	rest := msg[len(path):]
	if !strings.HasSuffix(path, "]") {
		return path
	}
	// An element's label may carry its name or table in parentheses.
	if strings.HasPrefix(rest, " (") {
		i := strings.Index(rest, "): ")
		if i < 0 {
			return path
		}
		rest = rest[i+1:]
	}
	if sub := leadingKey(strings.TrimPrefix(rest, ": ")); sub != "" && strings.HasPrefix(rest, ": ") {
		path += "." + sub
	}
	return path
}

// leadingKey returns the dotted key, with array indices, that s starts with.
func leadingKey(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
			r == '_' || r == '-' || r == '.' || r == '[' || r == ']')
	})
	if end < 0 {
		end = len(s)
	}
	return strings.TrimRight(s[:end], ".")
}

// pathPart is one part of a key with array indices: a name and, for an
// element of an array of tables, its index (-1 for none).
type pathPart struct {
	name  string
	index int
}

// splitPath parses a key such as cluster[0].replica[1].weight; it returns nil
// for anything else.
func splitPath(path string) []pathPart {
	if path == "" {
		return nil
	}
	var parts []pathPart
	for _, s := range strings.Split(path, ".") {
		p := pathPart{name: s, index: -1}
		if open := strings.IndexByte(s, '['); open >= 0 {
			if !strings.HasSuffix(s, "]") {
				return nil
			}
			n, err := strconv.Atoi(s[open+1 : len(s)-1])
			if err != nil || n < 0 {
				return nil
			}
			p = pathPart{name: s[:open], index: n}
		}
		if p.name == "" || strings.ContainsAny(p.name, "[]") {
			return nil
		}
		parts = append(parts, p)
	}
	return parts
}

// formatPath writes parts the way locate writes paths.
func formatPath(parts []pathPart) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(toml.Key{p.name}.String())
		if p.index >= 0 {
			fmt.Fprintf(&b, "[%d]", p.index)
		}
	}
	return b.String()
}

// pathLine returns the line of the key path names, or, when the toml
// library cannot tell that line (the key is not in the file, or the library
// knows only a later occurrence of it), the line of the nearest enclosing
// table it can tell; 0 when there is none.
func pathLine(text string, raw map[string]any, path string) int {
	parts := splitPath(path)
	for n := len(parts); n > 0; n-- {
		if line := partsLine(text, raw, parts[:n]); line > 0 {
			return line
		}
	}
	return 0
}

// partsLine returns the line of the key or array element parts names when
// it is the last occurrence of its key in the file: the only one whose line
// the toml library reports (see keyLine). It returns 0 otherwise.
func partsLine(text string, raw map[string]any, parts []pathPart) int {
	key := make(toml.Key, len(parts))
	for i, p := range parts {
		key[i] = p.name
	}
	last := parts[len(parts)-1]
	whole := append(slices.Clone(parts[:len(parts)-1]), pathPart{name: last.name, index: -1})
	found := locate(raw, key, nil)
	if len(found) == 0 || found[len(found)-1].path != formatPath(whole) {
		return 0
	}
	if last.index >= 0 {
		// An element of an array of tables: the library knows the line
		// of the array's last element only.
		elems, ok := asTables(found[len(found)-1].value)
		if !ok || last.index != len(elems)-1 {
			return 0
		}
	}
	return keyLine(text, raw, key)
}
