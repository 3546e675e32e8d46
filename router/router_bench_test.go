package router

import (
	"strconv"
	"testing"
)

const benchSQL = "SELECT id, name, balance FROM accounts WHERE id = 42"

// BenchmarkClassifyCached is the hot path: a statement the application repeats.
func BenchmarkClassifyCached(b *testing.B) {
	r := New(10000)
	r.Classify(benchSQL)
	b.ReportAllocs()
	for b.Loop() {
		if r.Classify(benchSQL).Kind != KindRead {
			b.Fatal("wrong plan")
		}
	}
}

// BenchmarkClassifyCachedParallel is the hot path from many sessions at once.
func BenchmarkClassifyCachedParallel(b *testing.B) {
	r := New(10000)
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = "SELECT * FROM t" + strconv.Itoa(i) + " WHERE id = 1"
		r.Classify(texts[i])
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Classify(texts[i&63])
			i++
		}
	})
}

// BenchmarkClassifyBytesCached is the hot path for a COM_QUERY payload held in a buffer.
func BenchmarkClassifyBytesCached(b *testing.B) {
	r := New(10000)
	buf := []byte(benchSQL)
	r.ClassifyBytes(buf)
	b.ReportAllocs()
	for b.Loop() {
		r.ClassifyBytes(buf)
	}
}

// BenchmarkClassifyMiss is a text never seen before: normalization and a full parse.
func BenchmarkClassifyMiss(b *testing.B) {
	r := New(0) // no cache, so every call takes the full path
	b.ReportAllocs()
	for b.Loop() {
		if r.Classify(benchSQL).Kind != KindRead {
			b.Fatal("wrong plan")
		}
	}
}

// BenchmarkClassifyShapeHit is a new text with the literal shape of one seen before:
// client-side interpolated parameters. Texts cycle through more values than the exact
// level holds.
func BenchmarkClassifyShapeHit(b *testing.B) {
	benchInterpolated(b, New(1000))
}

// BenchmarkClassifyDigestHit is BenchmarkClassifyShapeHit without the shape level: each
// text is normalized and its digest found.
func BenchmarkClassifyDigestHit(b *testing.B) {
	r := New(1000)
	r.shape = nil
	benchInterpolated(b, r)
}

func benchInterpolated(b *testing.B, r *Router) {
	texts := make([]string, 4096)
	for i := range texts {
		texts[i] = "SELECT id, name, balance FROM accounts WHERE id = " + strconv.Itoa(i)
	}
	want := r.Classify(texts[0])
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r.Classify(texts[i&4095]) != want {
			b.Fatal("a text of the same digest got another plan")
		}
		i++
	}
}

// BenchmarkClassifyMissSet is a new SET statement, which also restores its assignments.
func BenchmarkClassifyMissSet(b *testing.B) {
	r := New(0)
	b.ReportAllocs()
	for b.Loop() {
		r.Classify("SET NAMES utf8mb4 COLLATE utf8mb4_bin, sql_mode = 'STRICT_ALL_TABLES', autocommit = 1")
	}
}

// BenchmarkScopedRewriteShared is a statement that reads session-scoped
// values under a plan shared by texts differing in literals: each text is
// scanned for the reads (scanScoped) before it is rewritten.
func BenchmarkScopedRewriteShared(b *testing.B) {
	r := New(10000)
	r.Classify("INSERT INTO c (p, q, x) /* new row */ VALUES (LAST_INSERT_ID(), @@session.identity, 'one', `row_count`)")
	sql := []byte("INSERT INTO c (p, q, x) /* new row */ VALUES (LAST_INSERT_ID(), @@session.identity, 'two', `row_count`)")
	p := r.ClassifyBytes(sql)
	if p.Scoped == nil || !p.Scoped.TextRefs {
		b.Fatalf("the texts do not share a scanned plan: %+v", p.Scoped)
	}
	v := ScopedValues{LastInsertID: 9}
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if dst, ok = p.Scoped.Rewrite(dst[:0], sql, &v); !ok {
			b.Fatal("not rewritten")
		}
	}
}
