package grants

import (
	"strings"
	"testing"
)

const testHash = "*D821809F681A40A6E379B50D0463EFAE20BDD122"

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "'",
			"GRANT USAGE ON *.* TO `u`@`%`"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "' REQUIRE SSL",
			"GRANT USAGE ON *.* TO `u`@`%` REQUIRE SSL"},
		{"GRANT ALL PRIVILEGES ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "' WITH GRANT OPTION",
			"GRANT ALL PRIVILEGES ON *.* TO `u`@`%` WITH GRANT OPTION"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "' REQUIRE SSL WITH MAX_QUERIES_PER_HOUR 10",
			"GRANT USAGE ON *.* TO `u`@`%` REQUIRE SSL WITH MAX_QUERIES_PER_HOUR 10"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED VIA mysql_native_password USING '" + testHash + "'",
			"GRANT USAGE ON *.* TO `u`@`%`"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED VIA ed25519 USING 'ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY' OR unix_socket WITH GRANT OPTION",
			"GRANT USAGE ON *.* TO `u`@`%` WITH GRANT OPTION"},
		{"grant usage on *.* to `u`@`%` identified by password '" + testHash + "' with grant option",
			"grant usage on *.* to `u`@`%` with grant option"},
		// The words inside quotes are not keywords: neither the clause's
		// start nor its end.
		{"GRANT SELECT ON `identified`.* TO `u`@`%`", "GRANT SELECT ON `identified`.* TO `u`@`%`"},
		{"GRANT SELECT ON `db`.`t` TO `IDENTIFIED`@`%` IDENTIFIED BY PASSWORD '" + testHash + "'",
			"GRANT SELECT ON `db`.`t` TO `IDENTIFIED`@`%`"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED VIA ed25519 USING 'a WITH b' REQUIRE SSL",
			"GRANT USAGE ON *.* TO `u`@`%` REQUIRE SSL"},
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED VIA ed25519 USING 'it''s REQUIRE\\' WITH' WITH GRANT OPTION",
			"GRANT USAGE ON *.* TO `u`@`%` WITH GRANT OPTION"},
		{"GRANT USAGE ON *.* TO `with`@`require` IDENTIFIED BY PASSWORD \"" + testHash + "\"",
			"GRANT USAGE ON *.* TO `with`@`require`"},
		// A word only counts whole.
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "' WITHOUT REQUIRE",
			"GRANT USAGE ON *.* TO `u`@`%` REQUIRE"},
		{"GRANT SELECT ON xidentified.* TO `u`@`%`", "GRANT SELECT ON xidentified.* TO `u`@`%`"},
		// Nothing to cut.
		{"GRANT `r` TO `u`@`%`", "GRANT `r` TO `u`@`%`"},
		{"", ""},
		// An unterminated quote: the first word only.
		{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash, "GRANT"},
		{"'" + testHash, ""},
	} {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if got := sanitizeByLex(c.in); got != c.want {
			t.Errorf("the lexer's Sanitize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestSanitizeCopiesNoToken: Sanitize makes no string but its result, and
// none when the clause ends the line: the hash is never copied.
func TestSanitizeCopiesNoToken(t *testing.T) {
	end := "GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + testHash + "'"
	mid := end + " WITH GRANT OPTION"
	for _, c := range []struct {
		line  string
		alloc float64
	}{{end, 0}, {mid, 1}, {"GRANT SELECT ON `a`.`b` TO `u`@`%`", 0}} {
		if n := testing.AllocsPerRun(100, func() { _ = Sanitize(c.line) }); n != c.alloc {
			t.Errorf("Sanitize(%q): %v allocations, want %v", c.line, n, c.alloc)
		}
	}
}

// FuzzSanitize: the byte scan cuts exactly what the lexer-based Sanitize
// it replaced cut.
func FuzzSanitize(f *testing.F) {
	for _, l := range gt1 {
		f.Add(l)
	}
	for _, l := range []string{"IDENTIFIED", "x IDENTIFIED 'a''b' WITH", "IDENTIFIED `a` \"b\\\"\" REQUIRE", "'\\", "IDENTIFIED\tVIA\nx\rWITH"} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if got, want := Sanitize(line), sanitizeByLex(line); got != want {
			t.Fatalf("Sanitize(%q) = %q, the lexer's %q", line, got, want)
		}
	})
}

// sanitizeByLex is Sanitize as it was written with lex, the reference the
// byte scan is compared with.
func sanitizeByLex(line string) string {
	toks, err := lex(line)
	if err != nil {
		if i := strings.IndexByte(line, ' '); i > 0 {
			return line[:i]
		}
		return ""
	}
	for i, t := range toks {
		if t.quoted != 0 || !strings.EqualFold(t.text, "IDENTIFIED") {
			continue
		}
		end := len(line)
		for _, u := range toks[i+1:] {
			if u.quoted == 0 && (strings.EqualFold(u.text, "REQUIRE") || strings.EqualFold(u.text, "WITH")) {
				end = u.pos
				break
			}
		}
		head := strings.TrimRight(line[:t.pos], " ")
		if end == len(line) {
			return head
		}
		return head + " " + line[end:]
	}
	return line
}
