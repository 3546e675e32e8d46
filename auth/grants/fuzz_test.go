package grants

import (
	"strings"
	"testing"
)

// FuzzParse: any line, as an auth server or a configuration may give it,
// is either read or refused with an error, never a panic; and a line's
// IDENTIFIED BY PASSWORD hash never survives Sanitize.
func FuzzParse(f *testing.F) {
	for _, l := range gt1 {
		f.Add(l)
	}
	for _, l := range []string{"GRANT", "GRANT SELECT (", "GRANT `r", "SET DEFAULT ROLE", "GRANT SELECT ON *", "GRANT ALL ON `a`.`b` TO CURRENT_USER(", "'", "GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD 'x' WITH GRANT OPTION"} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _ = Parse("u", "%", []string{line})
		const hash = "*D821809F681A40A6E379B50D0463EFAE20BDD122"
		clean := Sanitize("GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + hash + "' " + line)
		if strings.Contains(clean, hash) && !strings.Contains(line, hash) {
			t.Fatalf("the hash survived Sanitize: %q", clean)
		}
	})
}
