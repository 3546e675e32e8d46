package router

import (
	"fmt"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
)

// TestLiteralShape: texts that differ only in literal values share a shape;
// texts that differ anywhere else, or in a literal the normalizer keeps (a
// column position after ORDER BY), do not; text the scanner cannot take
// apart with certainty has none.
func TestLiteralShape(t *testing.T) {
	same := [][2]string{
		{"SELECT c FROM sbtest1 WHERE id=5012", "SELECT c FROM sbtest1 WHERE id=77"},
		{"SELECT c FROM t WHERE id BETWEEN 10 AND 109", "SELECT c FROM t WHERE id BETWEEN 3 AND 4.5e3"},
		{"SELECT * FROM t WHERE name = 'a''b' AND n = \"x\"", "SELECT * FROM t WHERE name = '' AND n = \"yy\""},
		{"UPDATE t SET c='x' WHERE id = -1.5", "UPDATE t SET c='quite a lot longer' WHERE id = -2"},
		{"/* app */ SELECT `a'b` FROM t WHERE x = 1 -- it's\n", "/* app */ SELECT `a'b` FROM t WHERE x = 20 -- it's\n"},
		{"SELECT _utf8mb4 'x' FROM t", "SELECT _utf8mb4 'yz' FROM t"},
	}
	for _, p := range same {
		a, okA := literalShape(nil, p[0])
		b, okB := literalShape(nil, p[1])
		if !okA || !okB || string(a) != string(b) {
			t.Errorf("%q and %q: shapes %q (%v) and %q (%v), want one shape", p[0], p[1], a, okA, b, okB)
		}
	}
	differ := [][2]string{
		{"SELECT c FROM sbtest1 WHERE id=1", "SELECT c FROM sbtest2 WHERE id=1"},
		{"SELECT a, b FROM t ORDER BY 1", "SELECT a, b FROM t ORDER BY 2"},
		{"SELECT a FROM t GROUP BY a, 1", "SELECT a FROM t GROUP BY a, 2"},
		{"SELECT * FROM 1t", "SELECT * FROM 2t"},
		{"SELECT * FROM db.t1 WHERE x = 0x1F", "SELECT * FROM db.t1 WHERE x = 0x20"},
		{"SELECT a FROM t WHERE b = 1", "select a from t where b = 1"},
		{"SELECT a FROM t /* 1 */", "SELECT a FROM t /* 2 */"},
		{"SELECT `1` FROM t", "SELECT `2` FROM t"},
		{"SELECT @'a'", "SELECT @'b'"},
		{"SELECT X'01'", "SELECT X'02'"},
		{"SELECT '*' FROM t", "SELECT 'a' FROM t"},
	}
	for _, p := range differ {
		a, okA := literalShape(nil, p[0])
		b, okB := literalShape(nil, p[1])
		if okA && okB && string(a) == string(b) {
			t.Errorf("%q and %q share the shape %q", p[0], p[1], a)
		}
	}
	for _, s := range []string{"SELECT 'open", "SELECT \"open", "SELECT `open", "SELECT 1 /* open"} {
		if sh, ok := literalShape(nil, s); ok {
			t.Errorf("%q has the shape %q, want none", s, sh)
		}
	}
}

// FuzzLiteralShapeDigest checks what makes the shape a safe key in front of
// the digest level: a text and its shape (where each literal became a ?
// marker) normalize to the same digest, so any two texts of one shape do.
func FuzzLiteralShapeDigest(f *testing.F) {
	for _, s := range []string{
		"SELECT c FROM sbtest1 WHERE id=5012",
		"SELECT c FROM t WHERE id BETWEEN 10 AND 109 ORDER BY c LIMIT 10",
		"SELECT a, b FROM t ORDER BY a, 1, (2)",
		"SELECT * FROM t WHERE name = 'a''b' AND n = \"x\" AND m IN (1, 2, 3)",
		"UPDATE t SET c='x' WHERE id = -1.5e3",
		"INSERT INTO t VALUES (1, 'a', NULL), (2, _utf8mb4'b', 3.)",
		"/* sluice:master */ SELECT `a'b` FROM t WHERE x = 1 -- it's\n",
		"SELECT count(*) FROM t WHERE a=.5 AND b=1.2.3 AND c=0x1F AND d=1e",
		"SELECT 'a' 'b', 1 2 FROM t GROUP BY 1 HAVING x > 'y'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2048 || scanTextFlags(s) != 0 {
			return
		}
		shape, ok := literalShape(nil, s)
		if !ok {
			return
		}
		if a, b := parser.Normalize(s, "ON"), parser.Normalize(string(shape), "ON"); a != b {
			t.Fatalf("text %q normalizes to %q, its shape %q to %q", s, a, shape, b)
		}
	})
}

// TestShapeLevel: a text with the shape of one classified before gets that
// text's digest plan without allocating, hints included; a text the shape
// level must not serve (a backslash in it) is still classified in full.
func TestShapeLevel(t *testing.T) {
	r := New(100)
	first := r.Classify("SELECT c FROM sbtest1 WHERE id=1")
	if first.Kind != KindRead || first.Digest == "" {
		t.Fatalf("plan %+v", first)
	}
	other := []byte("SELECT c FROM sbtest1 WHERE id=987654")
	if p := r.ClassifyBytes(other); p != first {
		t.Fatalf("a text of the same shape got plan %+v, want the first text's %+v", p, first)
	}
	// Each run a text never seen, as interpolated parameters give.
	fresh := make([][]byte, 200)
	for i := range fresh {
		fresh[i] = fmt.Appendf(nil, "SELECT c FROM sbtest1 WHERE id=%d", 1000+i)
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		if r.ClassifyBytes(fresh[i]) != first {
			t.Fatal("a text of the same shape got another plan")
		}
		i++
	}); n != 0 {
		t.Fatalf("a shape hit allocates %v times", n)
	}
	if p := r.byShape("SELECT c FROM sbtest1 WHERE id=5 AND pad='a\\'b'"); p != nil {
		t.Fatalf("a text with a backslash was served by the shape level: %+v", p)
	}
	if p := r.Classify("SELECT c FROM sbtest1 WHERE id=5 AND pad='a\\'b'"); p.Kind != KindRead {
		t.Fatalf("a text with a backslash got %+v", p)
	}
	hinted := r.Classify("/* sluice:master */ SELECT c FROM sbtest1 WHERE id=2")
	if hinted.Target != TargetMaster {
		t.Fatalf("hinted text got %+v", hinted)
	}
	if p := r.Classify("/* sluice:master */ SELECT c FROM sbtest1 WHERE id=3"); p != hinted {
		t.Fatalf("a hinted text of the same shape got %+v, want %+v", p, hinted)
	}
	if p := r.Classify("SELECT c FROM sbtest1 WHERE id=4"); p != first {
		t.Fatalf("the unhinted shape changed: %+v", p)
	}
}
