package auth

import (
	"errors"
	"fmt"
	"strings"
)

// This file holds the pure part of the schema mirror: turning a master's
// SHOW CREATE TABLE into statements the auth server accepts, and the stub
// views, routines and sequences that stand for the master's. Nothing here
// does I/O.

// mirrorComment marks what the mirror creates on the auth server: the
// schemas it created (and so may drop once no master has them), and the
// stub views and routines.
const mirrorComment = "created by sluice (auth.mirror_schema)"

// quoteIdent quotes a MySQL identifier in backquotes.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// qualify is `schema`.`name`.
func qualify(schema, name string) string { return quoteIdent(schema) + "." + quoteIdent(name) }

// quoteString quotes a string literal the way the server reads it under
// any sql_mode: single quotes doubled, backslashes doubled (the mirror's
// connections run with an empty sql_mode, so backslashes escape).
func quoteString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// errNotCreateTable reports SHOW CREATE TABLE output the cleaner cannot
// read (not a CREATE TABLE, or not laid out one column per line).
var errNotCreateTable = errors.New("not a CREATE TABLE statement as SHOW CREATE TABLE prints it")

// createTable holds the two statements the mirror may create a table
// with: Full keeps columns, keys and checks; Bare keeps only each
// column's name and type, for when the auth server refuses Full.
type createTable struct {
	Full, Bare string
}

// cleanCreateTable turns a master's SHOW CREATE TABLE output (text) for
// the table that is to be schema.table on the auth server into statements
// that create it there with the same columns and no more: foreign keys,
// partitioning, AUTO_INCREMENT=n, ENGINE, DATA/INDEX DIRECTORY, row
// format, system versioning and every other table option except the
// default character set and collation are dropped, since they could fail
// on the auth server (a referenced table or an engine missing there, a
// directory that does not exist) and grants need none of them.
//
// It relies on SHOW CREATE TABLE's layout: the header line, one column,
// key or constraint per line (values with line breaks are escaped), and
// the table options on the line that closes the column list.
func cleanCreateTable(text, schema, table string) (createTable, error) {
	lines := strings.Split(text, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "CREATE TABLE ") || !strings.HasSuffix(lines[0], " (") {
		return createTable{}, errNotCreateTable
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], ")") {
			end = i
			break
		}
	}
	if end < 2 {
		return createTable{}, errNotCreateTable
	}
	head := "CREATE TABLE " + qualify(schema, table) + " (\n"
	opts := keptTableOptions(lines[end][1:])
	var full, bare []string
	for _, l := range lines[1:end] {
		def := strings.TrimSuffix(strings.TrimSpace(l), ",")
		if def == "" {
			continue
		}
		if isForeignKey(def) {
			continue
		}
		full = append(full, "  "+def)
		if strings.HasPrefix(def, "`") {
			col, err := bareColumn(def)
			if err != nil {
				return createTable{}, err
			}
			bare = append(bare, "  "+col)
		}
	}
	if len(bare) == 0 {
		return createTable{}, fmt.Errorf("%w: no column", errNotCreateTable)
	}
	return createTable{
		Full: head + strings.Join(full, ",\n") + "\n)" + opts,
		Bare: head + strings.Join(bare, ",\n") + "\n)" + opts,
	}, nil
}

// isForeignKey reports a FOREIGN KEY line, named (CONSTRAINT `x`
// FOREIGN KEY ...) or not.
func isForeignKey(def string) bool {
	rest := def
	if hasWordPrefix(rest, "CONSTRAINT") {
		rest = strings.TrimSpace(rest[len("CONSTRAINT"):])
		if strings.HasPrefix(rest, "`") {
			_, n, ok := readQuotedIdent(rest)
			if !ok {
				return false
			}
			rest = strings.TrimSpace(rest[n:])
		} else if i := strings.IndexByte(rest, ' '); i > 0 && !hasWordPrefix(rest, "FOREIGN") {
			rest = strings.TrimSpace(rest[i:])
		}
	}
	return hasWordPrefix(rest, "FOREIGN KEY")
}

// hasWordPrefix reports whether s starts with the words w (any letter
// case) followed by a space, a parenthesis or the end.
func hasWordPrefix(s, w string) bool {
	if len(s) < len(w) || !strings.EqualFold(s[:len(w)], w) {
		return false
	}
	return len(s) == len(w) || s[len(w)] == ' ' || s[len(w)] == '('
}

// readQuotedIdent reads the backquoted identifier at the start of s and
// returns it unquoted and how many bytes it took.
func readQuotedIdent(s string) (string, int, bool) {
	if !strings.HasPrefix(s, "`") {
		return "", 0, false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '`' {
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

// bareColumn reduces a column definition line to its name and type:
// the type word with its parenthesised arguments, UNSIGNED, ZEROFILL and
// the column's character set and collation; defaults, NOT NULL,
// AUTO_INCREMENT, generation expressions, checks and comments go.
func bareColumn(def string) (string, error) {
	name, n, ok := readQuotedIdent(def)
	if !ok {
		return "", fmt.Errorf("%w: column name in %q", errNotCreateTable, def)
	}
	words := splitTypeWords(strings.TrimSpace(def[n:]))
	if len(words) == 0 {
		return "", fmt.Errorf("%w: no type for column %s", errNotCreateTable, quoteIdent(name))
	}
	out := []string{quoteIdent(name), words[0]}
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case strings.EqualFold(w, "unsigned"), strings.EqualFold(w, "zerofill"), strings.EqualFold(w, "signed"):
			out = append(out, w)
		case strings.EqualFold(w, "CHARACTER") && i+2 < len(words) && strings.EqualFold(words[i+1], "SET"):
			out = append(out, "CHARACTER SET", words[i+2])
			i += 2
		case strings.EqualFold(w, "COLLATE") && i+1 < len(words):
			out = append(out, "COLLATE", words[i+1])
			i++
		default:
			return strings.Join(out, " "), nil
		}
	}
	return strings.Join(out, " "), nil
}

// splitTypeWords splits a column definition after its name into words,
// keeping parenthesised and quoted parts (enum('a','b c'), decimal(10,2))
// inside their word.
func splitTypeWords(s string) []string {
	var words []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '\'' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ' ' && depth == 0:
			if i > start {
				words = append(words, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		words = append(words, s[start:])
	}
	return words
}

// keptTableOptions returns the table options of SHOW CREATE TABLE's
// closing line (after the ")") that the mirror keeps, with a leading
// space: the default character set and collation. Everything else, and
// the partitioning lines after it, is dropped.
func keptTableOptions(s string) string {
	var kept []string
	for _, o := range splitTypeWords(strings.TrimSpace(s)) {
		k, v, ok := strings.Cut(o, "=")
		if !ok || v == "" {
			continue
		}
		switch strings.ToUpper(k) {
		case "CHARSET", "COLLATE":
			if isPlainWord(v) {
				kept = append(kept, strings.ToUpper(k)+"="+v)
			}
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return " DEFAULT " + strings.Join(kept, " ")
}

// isPlainWord reports a character set or collation name: letters, digits
// and underscores.
func isPlainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// stubView is a view with the given column names that reads nothing:
// SELECT NULL AS each column, SQL SECURITY INVOKER. Column-level grants
// need only the names; a stub needs no privilege on, and no order among,
// the tables and views the master's view reads, and shows no data.
func stubView(schema, view string, cols []string) string {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "NULL AS " + quoteIdent(c)
	}
	return "CREATE OR REPLACE SQL SECURITY INVOKER VIEW " + qualify(schema, view) + " AS SELECT " + strings.Join(sel, ", ")
}

// stubRoutine creates a routine of the master's name and type that does
// nothing: a grant ON PROCEDURE or ON FUNCTION needs the routine to
// exist, never its parameters or body. A stub runs with its caller's
// privileges, reads no SQL and, for a function, returns NULL, so EXECUTE
// on it grants nothing on the auth server.
func stubRoutine(schema, name string, function bool) string {
	q := qualify(schema, name)
	c := "COMMENT " + quoteString(mirrorComment)
	if function {
		return "CREATE FUNCTION IF NOT EXISTS " + q + "() RETURNS INT DETERMINISTIC NO SQL SQL SECURITY INVOKER " + c + " RETURN NULL"
	}
	return "CREATE PROCEDURE IF NOT EXISTS " + q + "() NO SQL SQL SECURITY INVOKER " + c + " BEGIN END"
}

// stubSequence creates a sequence of the master's name with the default
// options (grants on a sequence are table grants; its values do not
// matter on the auth server).
func stubSequence(schema, name string) string {
	return "CREATE SEQUENCE IF NOT EXISTS " + qualify(schema, name)
}

// createSchema creates a schema with the master's default character set
// and collation and the mirror's comment; plain is the fallback for a
// server that lacks the collation or schema comments (MySQL).
func createSchema(s *mirrorSchema) (full, plain string) {
	plain = "CREATE DATABASE IF NOT EXISTS " + quoteIdent(s.name)
	full = plain
	if isPlainWord(s.charset) {
		full += " CHARACTER SET " + s.charset
	}
	if isPlainWord(s.collation) {
		full += " COLLATE " + s.collation
	}
	return full + " COMMENT " + quoteString(mirrorComment), plain
}

// normalType is a column type as information_schema.COLUMNS.COLUMN_TYPE
// gives it, in a form that compares equal across servers: lower case,
// without the integer display widths MySQL 8 no longer prints.
func normalType(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	for _, w := range []string{"tinyint", "smallint", "mediumint", "bigint", "int"} {
		if !strings.HasPrefix(t, w+"(") {
			continue
		}
		if i := strings.IndexByte(t, ')'); i > 0 {
			return w + t[i+1:]
		}
	}
	return t
}
