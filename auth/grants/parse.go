// Package grants holds what an account may do, as the auth server's SHOW
// GRANTS describes it, and checks a statement's needs (router.Access)
// against it with MariaDB's own errors.
//
// A Set is immutable once Parse returns it and safe for concurrent use. It
// never holds a password or a password hash: Parse cuts every IDENTIFIED
// clause out of the lines before it keeps anything.
package grants

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-proxy/sluice/router"
)

// token is one lexical token of a SHOW GRANTS line: a word, a quoted name
// or string (text unquoted), or one punctuation byte. pos is its offset in
// the line.
type token struct {
	text   string
	quoted byte // '`', '\'', '"' or 0
	pos    int
}

// lex splits line into tokens.
func lex(line string) ([]token, error) {
	var out []token
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '`' || c == '\'' || c == '"':
			text, n, err := unquote(line[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, token{text: text, quoted: c, pos: i})
			i += n
		case isWordByte(c):
			j := i
			for j < len(line) && isWordByte(line[j]) {
				j++
			}
			out = append(out, token{text: line[i:j], pos: i})
			i = j
		default:
			out = append(out, token{text: line[i : i+1], pos: i})
			i++
		}
	}
	return out, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// unquote reads the quoted token at the start of s: a doubled quote stands
// for itself, and in '…' strings a backslash escapes the next byte.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && q != '`' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == q && i+1 < len(s) && s[i+1] == q:
			b.WriteByte(q)
			i++
		case c == q:
			return b.String(), i + 1, nil
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("unterminated quoted name")
}

// ErrSyntax reports a grant line that Parse cannot read; the message names
// the line's start, never an IDENTIFIED clause.
var ErrSyntax = errors.New("grants: cannot read grant")

// Sanitize returns line without its IDENTIFIED clause (IDENTIFIED BY
// PASSWORD '…', IDENTIFIED VIA … USING '…'), the only part of SHOW GRANTS
// output that can carry a password hash. Call it on a line before keeping
// it anywhere.
//
// It reads line in place, quote-aware as Parse's lexer is: the clause
// starts at the first unquoted word IDENTIFIED and ends before the first
// unquoted REQUIRE or WITH after it (or at the end of the line). No token
// is copied, so the hash is never copied either: the only string it makes
// is the result when text follows the clause; otherwise the result is a
// prefix of line (or line itself) and shares its memory. A line with an
// unterminated quote may hold anything: only its first word is kept.
func Sanitize(line string) string {
	cut, end := -1, -1
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '`' || c == '\'' || c == '"':
			n := quotedLen(line[i:])
			if n < 0 {
				if j := strings.IndexByte(line, ' '); j > 0 {
					return line[:j]
				}
				return ""
			}
			i += n
		case isWordByte(c):
			j := i
			for j < len(line) && isWordByte(line[j]) {
				j++
			}
			switch w := line[i:j]; {
			case cut < 0 && strings.EqualFold(w, "IDENTIFIED"):
				cut = i
			case cut >= 0 && end < 0 && (strings.EqualFold(w, "REQUIRE") || strings.EqualFold(w, "WITH")):
				end = i
			}
			i = j
		default:
			i++
		}
	}
	if cut < 0 {
		return line
	}
	head := strings.TrimRight(line[:cut], " ")
	if end < 0 {
		return head
	}
	return head + " " + line[end:]
}

// quotedLen is the length of the quoted token at the start of s, by
// unquote's rules, without reading its text out; -1 when it is not
// terminated.
func quotedLen(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && q != '`' && i+1 < len(s):
			i++
		case c == q && i+1 < len(s) && s[i+1] == q:
			i++
		case c == q:
			return i + 1
		}
	}
	return -1
}

// grantee is the account or role a grant line gives to. CURRENT_USER (in
// static configuration) is the empty grantee.
type grantee struct {
	user, host string
	role       bool
}

func (g grantee) String() string {
	if g.role {
		return "`" + g.user + "`"
	}
	return "`" + g.user + "`@`" + g.host + "`"
}

// line is one parsed grant line.
type line struct {
	to grantee
	// kind: 'p' privileges on an object, 'r' a role granted, 'd' SET
	// DEFAULT ROLE, 'x' a line with nothing to enforce (GRANT PROXY).
	kind byte
	obj  object
	priv router.Priv
	cols []colPriv
	role string
}

// object is what a privilege grant is ON.
type object struct {
	// level: 'g' *.*, 'd' db.*, 't' db.table, 'p' procedure, 'f'
	// function, 'k' package.
	level     byte
	db, table string
}

type colPriv struct {
	col  string
	priv router.Priv
}

// parser reads one line's tokens.
type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return token{}
}

func (p *parser) next() token { t := p.peek(); p.i++; return t }

// word reports whether the next token is the bare word w, and takes it.
func (p *parser) word(w string) bool {
	t := p.peek()
	if t.quoted == 0 && strings.EqualFold(t.text, w) {
		p.i++
		return true
	}
	return false
}

func (p *parser) punct(c string) bool {
	t := p.peek()
	if t.quoted == 0 && t.text == c {
		p.i++
		return true
	}
	return false
}

// parseLine parses one SHOW GRANTS line.
func parseLine(s string) (line, error) {
	toks, err := lex(s)
	if err != nil {
		return line{}, err
	}
	p := &parser{toks: toks}
	switch {
	case p.word("SET"):
		if !p.word("DEFAULT") || !p.word("ROLE") {
			return line{}, errors.New("SET without DEFAULT ROLE")
		}
		role := p.next().text
		if strings.EqualFold(role, "NONE") && p.toks[p.i-1].quoted == 0 {
			role = ""
		}
		if !p.word("FOR") {
			return line{}, errors.New("SET DEFAULT ROLE without FOR")
		}
		to, err := p.grantee()
		return line{kind: 'd', role: role, to: to}, err
	case p.word("GRANT"):
	default:
		return line{}, errors.New("not a GRANT")
	}
	if p.word("PROXY") {
		return line{kind: 'x'}, nil
	}
	if t := p.peek(); t.quoted != 0 {
		// GRANT `role` TO grantee.
		p.i++
		if !p.word("TO") {
			return line{}, errors.New("role grant without TO")
		}
		to, err := p.grantee()
		return line{kind: 'r', role: t.text, to: to}, err
	}
	l := line{kind: 'p'}
	if err := p.privileges(&l); err != nil {
		return line{}, err
	}
	if err := p.object(&l.obj); err != nil {
		return line{}, err
	}
	if !p.word("TO") {
		return line{}, errors.New("grant without TO")
	}
	if l.to, err = p.grantee(); err != nil {
		return line{}, err
	}
	for p.i < len(p.toks) {
		if p.word("WITH") && p.word("GRANT") && p.word("OPTION") {
			l.priv |= router.PrivGrant
			continue
		}
		p.i++
	}
	return l, nil
}

// privileges reads the privilege list up to ON.
func (p *parser) privileges(l *line) error {
	for {
		var words []string
		for {
			t := p.peek()
			if t.quoted != 0 || t.text == "" {
				return errors.New("privilege list without ON")
			}
			if t.text == "," || t.text == "(" || strings.EqualFold(t.text, "ON") && len(words) > 0 {
				break
			}
			words = append(words, strings.ToUpper(t.text))
			p.i++
		}
		name := strings.Join(words, " ")
		var priv router.Priv
		switch name {
		case "ALL", "ALL PRIVILEGES":
			priv = router.PrivAll
		case "USAGE":
		default:
			var ok bool
			if priv, ok = router.PrivByName(name); !ok {
				return fmt.Errorf("unknown privilege %q", name)
			}
		}
		if p.punct("(") {
			for {
				c := p.next()
				if c.text == "" {
					return errors.New("column list without )")
				}
				l.cols = append(l.cols, colPriv{col: strings.ToLower(c.text), priv: priv})
				if p.punct(")") {
					break
				}
				if !p.punct(",") {
					return errors.New("column list without ,")
				}
			}
		} else {
			l.priv |= priv
		}
		if p.word("ON") {
			return nil
		}
		if !p.punct(",") {
			return errors.New("privilege list without ,")
		}
	}
}

// object reads what the grant is ON.
func (p *parser) object(o *object) error {
	o.level = 't'
	switch {
	case p.word("PROCEDURE"):
		o.level = 'p'
	case p.word("FUNCTION"):
		o.level = 'f'
	case p.word("PACKAGE"):
		p.word("BODY")
		o.level = 'k'
	case p.word("TABLE"):
	}
	first := p.next()
	if !p.punct(".") {
		if first.text == "*" {
			return errors.New("ON * names the current database, which a grant line never does")
		}
		return errors.New("object without a database")
	}
	second := p.next()
	switch {
	case first.quoted == 0 && first.text == "*" && second.quoted == 0 && second.text == "*":
		o.level = 'g'
	case second.quoted == 0 && second.text == "*":
		o.level, o.db = 'd', first.text
	default:
		o.db, o.table = first.text, second.text
	}
	return nil
}

// grantee reads `user`@`host`, `role`, or CURRENT_USER[()].
func (p *parser) grantee() (grantee, error) {
	t := p.next()
	if t.text == "" {
		return grantee{}, errors.New("no grantee")
	}
	if t.quoted == 0 && strings.EqualFold(t.text, "CURRENT_USER") {
		if p.punct("(") && !p.punct(")") {
			return grantee{}, errors.New("CURRENT_USER( without )")
		}
		return grantee{}, nil
	}
	if p.punct("@") {
		h := p.next()
		return grantee{user: t.text, host: h.text}, nil
	}
	return grantee{user: t.text, role: true}, nil
}
