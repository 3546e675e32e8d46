package conf

import (
	"bufio"
	"encoding"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// exampleFile is the complete annotated example, installed by the Debian
// package as /etc/sluice/sluice.toml.
const exampleFile = "../deploy/sluice.toml"

// The example's secrets, as the environment variables it names would hold them.
const (
	exampleAdminPassword   = "admin-example-password"
	exampleBackendPassword = "backend-example-password"
)

// loadExample loads exampleFile with the environment variables its
// password_env keys name set.
func loadExample(t *testing.T) *Config {
	t.Helper()
	t.Setenv("SLUICE_ADMIN_PASSWORD", exampleAdminPassword)
	t.Setenv("SLUICE_BACKEND_PASSWORD", exampleBackendPassword)
	c, err := Load(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exampleOmits are keys the example leaves out on purpose: a plain-text
// password is possible but never what an installed file should suggest
// (the example shows password_env and password_file instead).
var exampleOmits = map[string]bool{
	"admin.password":        true,
	"cluster.password":      true,
	"auth.service_password": true,
}

// TestExampleShowsEveryKey keeps the example complete: every key the
// configuration accepts appears in its table, set or commented out
// ("# key = default"), except the plain-text passwords of exampleOmits. A
// key added to conf without a line in deploy/sluice.toml fails here.
func TestExampleShowsEveryKey(t *testing.T) {
	shown := exampleKeys(t)
	var want []string
	schemaKeys(reflect.TypeFor[Config](), "", &want)
	if len(want) < 80 {
		t.Fatalf("found only %d keys in Config: the walk is broken", len(want))
	}
	for _, k := range want {
		// A [[limits.user]] entry takes any key of [limits]; the
		// example shows them once, in [limits].
		if sub, ok := strings.CutPrefix(k, "limits.user."); ok && shown["limits."+sub] {
			continue
		}
		if !shown[k] && !exampleOmits[k] {
			t.Errorf("%s: key %q is not in the example (add it, commented out with its default if need be)", exampleFile, k)
		}
	}
	for k := range shown {
		if !contains(want, k) {
			t.Errorf("%s: %q is not a key of the configuration", exampleFile, k)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// schemaKeys appends the dotted path of every leaf key of the struct type
// typ under prefix; a slice of structs is an array of tables.
func schemaKeys(typ reflect.Type, prefix string, out *[]string) {
	textType := reflect.TypeFor[encoding.TextUnmarshaler]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			schemaKeys(f.Type, prefix, out)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textType) {
			schemaKeys(ft, prefix+name+".", out)
			continue
		}
		*out = append(*out, prefix+name)
	}
}

// exampleKeys reads the example's table headers and keys, commented out or
// not, as dotted paths.
func exampleKeys(t *testing.T) map[string]bool {
	f, err := os.Open(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header := regexp.MustCompile(`^\s*#?\s*\[\[?([a-z_.]+)\]\]?`)
	key := regexp.MustCompile(`^\s*(?:#\s*(?:or:\s*)?)?([a-z_]+)\s*=`)
	keys := map[string]bool{}
	table := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1]
			continue
		}
		if m := key.FindStringSubmatch(line); m != nil && table != "" {
			keys[table+"."+m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
