package conf

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// parse is Parse with the directory that relative secret files are read
// from and whether secrets are resolved at all.
//
// It reports every problem it can find in one pass: only a syntax error,
// after which nothing of the document is known, stops it. Values of the
// wrong type or form are dropped after being reported, so that the rest of
// the document is still decoded, checked for unknown keys and validated;
// validation problems about a dropped value are left out, since the value's
// own report already says what is wrong with it.
func parse(data []byte, src secretSource) (*Config, error) {
	text := string(data)

	// A generic decode first: it reports syntax errors, and its maps let
	// checkValues report values of the wrong type or form and
	// applyElementDefaults see which keys of array elements were given.
	var raw map[string]any
	rawMD, err := toml.Decode(text, &raw)
	if err != nil {
		return nil, &errorList{errs: []error{syntaxError(err)}}
	}
	errs, dropped := checkValues(text, &rawMD, raw)

	typed := text
	if len(dropped) > 0 {
		// The typed decode stops at its first error, so it reads the
		// document without the values already reported.
		for _, p := range dropped {
			p.drop()
		}
		var b strings.Builder
		if err := toml.NewEncoder(&b).Encode(raw); err != nil {
			return nil, &errorList{errs: append(errs, fmt.Errorf("re-encode the values left: %w", err))}
		}
		typed = b.String()
	}
	c := defaults()
	md, err := toml.Decode(typed, c)
	if err != nil {
		e := decodeError(err)
		if le, ok := e.(*lineError); ok && typed != text {
			le.line = 0 // a line of the re-encoded text, not of the file
		}
		return nil, &errorList{errs: sortByLine(append(errs, e))}
	}
	errs = append(errs, unknownKeys(text, &md, raw)...)
	applyElementDefaults(c, raw)
	c.normalize()

	later := c.resolveSecrets(src)
	if err := c.Validate(); err != nil {
		later = append(later, unjoin(err)...)
	}
	reported := make([]string, len(dropped))
	for i, p := range dropped {
		reported[i] = p.at
	}
	errs = append(errs, placeProblems(text, raw, later, reported)...)
	if len(errs) > 0 {
		return nil, &errorList{errs: sortByLine(errs)}
	}
	return c, nil
}

// lineError is a problem at a known line of the file. Its text is
// "line N: msg", or msg alone when the line is not known; it unwraps to the
// toml library's error, if any.
type lineError struct {
	line int
	msg  string
	err  error
}

func (e *lineError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return e.msg
}

func (e *lineError) Unwrap() error { return e.err }

// syntaxError turns a TOML syntax error into one line that starts with the
// line number.
func syntaxError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &lineError{line: pe.Position.Line, msg: "invalid TOML: " + pe.Message, err: err}
	}
	return fmt.Errorf("invalid TOML: %w", err)
}

// decodeError rewrites an error of the typed decode, which checkValues
// should have made impossible. The toml library reports a failed
// UnmarshalText as a ParseError whose LastKey is the dotted key and whose line
// is that of the key's last occurrence; other errors already name the line
// and key and are returned as they are.
func decodeError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.LastKey != "" {
		return &lineError{line: pe.Position.Line, msg: pe.LastKey + ": " + pe.Message, err: err}
	}
	return err
}

// maxReported caps the problems of one kind that are reported in detail.
// Finding a key's line costs a decode of the whole file, and a file with
// more problems than this is most likely not a sluice configuration at all.
const maxReported = 10

// keyIndex tells, for every dotted key of a document, where it first occurs
// and how often; keys of arrays of tables occur once per element that sets
// them.
type keyIndex struct {
	first map[string]int
	count map[string]int
}

func newKeyIndex(md *toml.MetaData) keyIndex {
	keys := md.Keys()
	x := keyIndex{first: make(map[string]int, len(keys)), count: make(map[string]int, len(keys))}
	for i, k := range keys {
		s := k.String()
		if x.count[s] == 0 {
			x.first[s] = i
		}
		x.count[s]++
	}
	return x
}

// tooMany is the line that stands for problems beyond maxReported.
func tooMany(n int, what string) error {
	return fmt.Errorf("... and %d more %s", n, what)
}

// unknownKeys reports every key of the document that does not belong to the
// schema, one line each, in file order. A whole unknown table is reported
// once, not once per key inside it.
func unknownKeys(text string, md *toml.MetaData, raw map[string]any) []error {
	undecoded := md.Undecoded()
	if len(undecoded) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		seen[k.String()] = false
	}
	var unknown []toml.Key
outer:
	for _, k := range undecoded {
		s := k.String()
		for i := 1; i < len(k); i++ {
			if _, ok := seen[k[:i].String()]; ok {
				continue outer // inside an unknown table
			}
		}
		if seen[s] {
			continue // another element of an array of tables
		}
		seen[s] = true
		unknown = append(unknown, k)
	}

	index := newKeyIndex(md)
	var errs []error
	for n, k := range unknown {
		if n == maxReported {
			errs = append(errs, tooMany(len(unknown)-n, "unknown keys"))
			break
		}
		e := &lineError{msg: fmt.Sprintf("unknown key %q", k.String())}
		if index.count[k.String()] == 1 {
			e.line = keyLine(text, raw, k)
		} else {
			var where []string
			for _, p := range locate(raw, k, nil) {
				where = append(where, p.path)
			}
			if len(where) > 0 {
				e.msg += " at " + strings.Join(where, ", ")
			}
		}
		if alt := suggest(k); alt != "" {
			e.msg += fmt.Sprintf(" (did you mean %q?)", alt)
		}
		errs = append(errs, e)
	}
	return errs
}

// lineProbe stands in for an unknown key when asking the toml library where
// the key is: decoding into it always fails, and the library's error carries
// the key's position.
type lineProbe struct{}

var errLineProbe = errors.New("sluice conf line probe")

// UnmarshalTOML implements toml.Unmarshaler by failing.
func (lineProbe) UnmarshalTOML(any) error { return errLineProbe }

// keyLine returns the line on which key is defined, or 0 when the toml
// library cannot tell. The library keeps key positions private, but reports
// them in the ParseError of a failed Unmarshaler; keyLine therefore decodes
// the document into a type made for the purpose whose only field, at the
// path of key, is a lineProbe. For a key inside an array of tables the
// library knows the position of the last occurrence only, so callers ask
// only about keys that occur once.
func keyLine(text string, raw map[string]any, key toml.Key) int {
	t := reflect.TypeOf(lineProbe{})
	for i := len(key) - 1; i >= 0; i-- {
		name := key[i]
		if name == "" || strings.ContainsAny(name, `,"\`+"`") {
			return 0 // cannot be expressed as a struct tag
		}
		t = reflect.StructOf([]reflect.StructField{{
			Name: "F",
			Type: t,
			Tag:  reflect.StructTag("toml:" + strconv.Quote(name)),
		}})
		if i == 0 {
			break
		}
		// The parent is a table or an array of tables.
		parents := locate(raw, key[:i], nil)
		if len(parents) == 0 {
			return 0
		}
		switch parents[0].value.(type) {
		case map[string]any:
		case []map[string]any, []any:
			t = reflect.SliceOf(t)
		default:
			return 0
		}
	}
	_, err := toml.Decode(text, reflect.New(t).Interface())
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Message == errLineProbe.Error() {
		return pe.Position.Line
	}
	return 0
}

// located is a value found by locate, with its key written with array
// indices, such as cluster[1].replica[0].weight.
type located struct {
	path  string
	value any
}

// locate walks the generically decoded document along key, descending into
// every element of arrays of tables, and returns the values at key for which
// match (if not nil) is true, in document order.
func locate(raw map[string]any, key toml.Key, match func(any) bool) []located {
	var out []located
	var walk func(m map[string]any, prefix string, rest toml.Key)
	walk = func(m map[string]any, prefix string, rest toml.Key) {
		v, ok := m[rest[0]]
		if !ok {
			return
		}
		name := prefix + toml.Key{rest[0]}.String()
		if len(rest) == 1 {
			if match == nil || match(v) {
				out = append(out, located{path: name, value: v})
			}
			return
		}
		switch v := v.(type) {
		case map[string]any:
			walk(v, name+".", rest[1:])
		case []map[string]any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d].", name, i), rest[1:])
			}
		case []any:
			for i, e := range v {
				if e, ok := e.(map[string]any); ok {
					walk(e, fmt.Sprintf("%s[%d].", name, i), rest[1:])
				}
			}
		}
	}
	if len(key) > 0 {
		walk(raw, "", key)
	}
	return out
}

// suggest returns the schema key closest to the last part of an unknown key,
// or "" if none is close enough to be a likely typo.
func suggest(key toml.Key) string {
	t := reflect.TypeOf(Config{})
	for _, name := range key[:len(key)-1] {
		f, ok := fieldByKey(t, name)
		if !ok {
			return ""
		}
		t = f.Type
		for t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
	}
	typo := strings.ToLower(key[len(key)-1])
	best, bestDist := "", 3 // suggest only within an edit distance of 2
	for _, f := range schemaFields(t) {
		name := tomlName(f)
		if name == "" {
			continue
		}
		if d := editDistance(typo, name); d < bestDist && d < len(name) {
			best, bestDist = name, d
		}
	}
	return best
}

// fieldByKey finds the field of struct type t that the toml library decodes
// key into; like the library, it falls back to a case-insensitive match.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for _, f := range schemaFields(t) {
		name := tomlName(f)
		if name == key {
			return f, true
		}
		if !found && strings.EqualFold(name, key) {
			fold, found = f, true
		}
	}
	return fold, found
}

// schemaFields lists the fields of struct type t as the toml library sees
// them: the fields of an embedded struct without a toml tag stand in for it,
// as if they were t's own.
func schemaFields(t reflect.Type) []reflect.StructField {
	out := make([]reflect.StructField, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("toml") == "" {
			out = append(out, schemaFields(f.Type)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// tomlName is the key of a struct field in the TOML schema, or "" if the
// field is not part of it.
func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// editDistance is the Levenshtein distance between a and b, counting an
// adjacent transposition ("wieght" for "weight") as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// applyElementDefaults fills the defaults of settings inside arrays of
// tables, which cannot be set before decoding. A value given explicitly, even
// a zero one, is kept so that Validate can reject it.
func applyElementDefaults(c *Config, raw map[string]any) {
	clusters := tables(raw, "cluster")
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		var rawCluster map[string]any
		if i < len(clusters) {
			rawCluster = clusters[i]
		}
		if cl.Balance == "" {
			cl.Balance = DefaultBalance
		}
		if cl.TLS == "" {
			cl.TLS = DefaultTLSMode
		}
		if cl.Consistency == "" {
			cl.Consistency = DefaultConsistency
		}
		if _, ok := rawCluster["pool_size"]; !ok {
			cl.PoolSize = DefaultPoolSize
		}
		if _, ok := rawCluster["pool_wait_timeout"]; !ok {
			cl.PoolWaitTimeout = Duration{DefaultPoolWaitTimeout}
		}
		if _, ok := rawCluster["max_replication_lag"]; !ok {
			cl.MaxReplicationLag = Duration{DefaultMaxReplicationLag}
		}
		if _, ok := rawCluster["reads_fall_back_to_master"]; !ok {
			cl.ReadsFallBackToMaster = DefaultReadsFallBackToMaster
		}
		replicas := tables(rawCluster, "replica")
		for j := range cl.Replicas {
			if j < len(replicas) {
				if _, ok := replicas[j]["weight"]; ok {
					continue
				}
			}
			cl.Replicas[j].Weight = DefaultReplicaWeight
		}
	}
	limitUsers := tables(asMap(raw["limits"]), "user")
	for i := range c.Limits.Users {
		var given map[string]any
		if i < len(limitUsers) {
			given = limitUsers[i]
		}
		inheritLimits(&c.Limits.Users[i].LimitValues, &c.Limits.LimitValues, given)
	}
	shards := tables(raw, "shard")
	for i := range c.Shards {
		if i < len(shards) {
			if _, ok := shards[i]["tables_per_cluster"]; ok {
				continue
			}
		}
		c.Shards[i].TablesPerCluster = DefaultTablesPerCluster
	}
}

// inheritLimits copies into v every limit of def that the [[limits.user]]
// entry given does not set.
func inheritLimits(v, def *LimitValues, given map[string]any) {
	dst, src := reflect.ValueOf(v).Elem(), reflect.ValueOf(def).Elem()
	for i := 0; i < dst.NumField(); i++ {
		if _, ok := given[tomlName(dst.Type().Field(i))]; !ok {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// asMap returns v as a table, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// tables returns the elements of the array of tables m[key], or nil.
func tables(m map[string]any, key string) []map[string]any {
	t, _ := asTables(m[key])
	return t
}

// normalize brings values that have several spellings to one: password
// hashes to upper case.
func (c *Config) normalize() {
	c.Fleet.normalize()
	for i := range c.Auth.Users {
		c.Auth.Users[i].PasswordHash = strings.ToUpper(c.Auth.Users[i].PasswordHash)
	}
}
