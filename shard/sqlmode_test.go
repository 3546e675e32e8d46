package shard

import (
	"errors"
	"strings"
	"testing"
)

// TestRewriteKeepsMeaning: the physical text of a statement on a sharded
// table reads, under the sql_mode it was prepared for, as the client's
// text: literals as spelled, strings quoted for the mode, and constructs
// the parser writes otherwise written as MariaDB reads them.
func TestRewriteKeepsMeaning(t *testing.T) {
	r := testRules(t)
	cases := []struct {
		mode SQLMode
		sql  string
		want string // the text on shard 0
	}{
		{0, "SELECT * FROM orders WHERE uid = 0x0b", "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0x0b"},
		{0, "SELECT * FROM orders WHERE uid = X'0b'", "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=X'0b'"},
		{0, "SELECT 0b101, b'101', 1e0, .5, 1.50 FROM orders WHERE uid = 0", "SELECT 0b101,0b101,1e0,.5,1.50 FROM `orders_0` AS `orders` WHERE `uid`=0"},
		{0, "SELECT _latin1 0x41 FROM orders WHERE uid = 0", "SELECT _latin1 0x41 FROM `orders_0` AS `orders` WHERE `uid`=0"},
		{0, "SELECT CHAR(65, 66 USING latin1) AS c FROM orders WHERE uid = 0", "SELECT CHAR(65, 66 USING LATIN1) AS `c` FROM `orders_0` AS `orders` WHERE `uid`=0"},
		{0, "SELECT INSERT(note, 1, 1, 'x') AS c FROM orders WHERE uid = 0", "SELECT INSERT(`note`, 1, 1, 'x') AS `c` FROM `orders_0` AS `orders` WHERE `uid`=0"},
		{0, `SELECT * FROM orders WHERE uid = 0 AND note = 'a\\b'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND `note`='a\\\\b'"},
		{ModeNoBackslashEscapes, `SELECT * FROM orders WHERE uid = 0 AND note = 'a\'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND `note`='a\\'"},
		{ModeANSIQuotes, `SELECT * FROM orders WHERE uid = 0 AND "note" = 'x'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND `note`='x'"},
		{0, `SELECT * FROM orders WHERE uid = 0 AND "note" = 'x'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND 'note'='x'"},
		{ModePipesAsConcat, `SELECT * FROM orders WHERE uid = 0 AND note = 'a' || 'b'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND `note`=CONCAT('a', 'b')"},
		{0, `SELECT * FROM orders WHERE uid = 0 AND note = 'a' || 'b'`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND `note`='a' OR 'b'"},
		{ModeHighNotPrecedence, `SELECT * FROM orders WHERE uid = 0 AND NOT amount BETWEEN 1 AND 2`, "SELECT * FROM `orders_0` AS `orders` WHERE `uid`=0 AND !`amount` BETWEEN 1 AND 2"},
		{0, "SELECT ? FROM orders WHERE uid = 0", "SELECT ? AS `?` FROM `orders_0` AS `orders` WHERE `uid`=0"},
	}
	for _, c := range cases {
		tm, err := r.PrepareMode("pay", c.sql, c.mode)
		if err != nil {
			t.Errorf("mode %d: %s: %v", c.mode, c.sql, err)
			continue
		}
		if got := tm.Sample().SQL; got != c.want {
			t.Errorf("mode %d: %s\n got  %s\n want %s", c.mode, c.sql, got, c.want)
		}
		if tm.Mode() != c.mode {
			t.Errorf("mode %d: %s: template of mode %d", c.mode, c.sql, tm.Mode())
		}
	}
}

// TestRewriteRefusals: what sluice cannot rewrite exactly is refused with
// ErrUnsupported, naming what.
func TestRewriteRefusals(t *testing.T) {
	r := testRules(t)
	cases := []struct {
		mode SQLMode
		sql  string
		want string
	}{
		{0, "SELECT 0x41 + 0, X'41' + 0 FROM orders WHERE uid = 0", "x'41'"},
		{0, "SELECT * FROM orders WHERE uid = 0 LOCK IN SHARE MODE", "LOCK IN SHARE MODE"},
		{0, "SELECT note->'$.a' FROM orders WHERE uid = 0", "->"},
		{0, "SELECT id /*M!100000 , note */ FROM orders WHERE uid = 0", "/*M!"},
		{0, "SELECT id /*!99999 , note */ FROM orders WHERE uid = 0", "/*!"},
		{0, "SELECT N'a' 'b' FROM orders WHERE uid = 0", "introducer"},
		{0, "SELECT insert_func(note, 1) FROM orders WHERE uid = 0", "insert_func"},
		{ModeUnsure, "SELECT * FROM orders WHERE uid = 0", "sql_mode"},
	}
	for _, c := range cases {
		_, err := r.PrepareMode("pay", c.sql, c.mode)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mode %d: %s: %v, want ErrUnsupported naming %q", c.mode, c.sql, err, c.want)
		}
	}
	// Unsure of the mode, a text naming no sharded table still runs.
	tm, err := r.PrepareMode("pay", "SELECT 1", ModeUnsure)
	if err != nil || tm.Sample().SQL != "SELECT 1" {
		t.Errorf("SELECT 1 under ModeUnsure: %v", err)
	}
	// /*!NNNNN before 5.7 is code to both.
	if _, err := r.PrepareMode("pay", "SELECT id /*!50000 , note */ FROM orders WHERE uid = 0", 0); err != nil {
		t.Errorf("/*!50000: %v", err)
	}
}

// TestTemplateCachePerMode: one text prepared under two modes gives two
// templates.
func TestTemplateCachePerMode(t *testing.T) {
	r := testRules(t)
	const q = `SELECT * FROM orders WHERE "note" = 'x'`
	a, err1 := r.PrepareMode("pay", q, 0)
	b, err2 := r.PrepareMode("pay", q, ModeANSIQuotes)
	if err1 != nil || err2 != nil || a == b || a.Sample().SQL == b.Sample().SQL {
		t.Fatalf("one template for two modes: %v %v", err1, err2)
	}
	if c, _ := r.PrepareMode("pay", q, ModeANSIQuotes); c != b {
		t.Error("the second PrepareMode under a mode did not hit the cache")
	}
}

func TestScanLiterals(t *testing.T) {
	got := scanLiterals("SELECT 0x1f, x'1F', b'1', 0b1, 1e5, .5, a1, 1abc, t.5x, `0x1`, '0x2', \"0x3\", _latin1 0x41, -- 0x4\n /* 0x5 */ /*! 0x6 */ 0x1g", 0)
	var texts []string
	for _, tk := range got {
		texts = append(texts, tk.text)
	}
	want := "0x1f x'1F' b'1' 0b1 1e5 .5 _latin1 0x41 0x6"
	if strings.Join(texts, " ") != want {
		t.Errorf("scanLiterals = %q, want %q", strings.Join(texts, " "), want)
	}
	if got := scanLiterals(`SELECT "0x3", 7`, ModeANSIQuotes); len(got) != 1 || got[0].text != "7" {
		t.Errorf("under ANSI_QUOTES a \"name\" is no literal: %v", got)
	}
	if got := scanLiterals(`SELECT 'a\', 7`, ModeNoBackslashEscapes); len(got) != 1 || got[0].text != "7" {
		t.Errorf("under NO_BACKSLASH_ESCAPES 'a\\' ends the string: %v", got)
	}
}
