package conf

import (
	"strings"
	"testing"
	"time"
)

// TestCacheKeys: [cache] and cache_ttl decode, default safely, are
// checked naming the key (and its line), and change live on reload.
func TestCacheKeys(t *testing.T) {
	c := mustParse(t, base)
	if c.Cache.MaxMemory != DefaultCacheMaxMemory || c.Cache.MaxEntry != DefaultCacheMaxEntry ||
		c.Cache.OwnWritesWindow.Duration != DefaultCacheOwnWritesWindow {
		t.Fatalf("defaults %+v", c.Cache)
	}
	c = mustParse(t, base+"[cache]\nmax_memory = 1000\nmax_entry = 100\nown_writes_window = \"0s\"\n[[rule]]\nname = \"c\"\nkind = \"read\"\ncache_ttl = \"5s\"\n")
	if c.Cache.MaxMemory != 1000 || c.Cache.MaxEntry != 100 || c.Cache.OwnWritesWindow.Duration != 0 {
		t.Fatalf("[cache] %+v", c.Cache)
	}
	if c.Rules[0].CacheTTL.Duration != 5*time.Second {
		t.Fatalf("cache_ttl %v", c.Rules[0].CacheTTL)
	}
	if !strings.Contains(c.Describe(), "cache 5s") {
		t.Errorf("Describe does not show the rule's cache_ttl:\n%s", c.Describe())
	}
	for _, tc := range []struct{ doc, want string }{
		{"[cache]\nmax_memory = -1", "cache.max_memory must be ≥ 0"},
		{"[cache]\nmax_entry = 0", "cache.max_entry must be ≥ 1"},
		{"[cache]\nown_writes_window = \"-1s\"", "cache.own_writes_window must be ≥ 0"},
		{"[cache]\nmax_memmory = 1", `unknown key "cache.max_memmory"`},
		{"[cache]\nbinlog_server_id = -1", "cache.binlog_server_id must be 0 (derived) or 1 … 4294967295, got -1"},
		{"[cache]\nbinlog_server_id = 4294967296", "cache.binlog_server_id must be 0 (derived) or 1 … 4294967295"},
		{"[cache]\nbinlog_invalidation = \"yes\"", "cache.binlog_invalidation"},
		{"[[rule]]\nname = \"a\"\ncache_ttl = \"-1s\"", `rule[0] ("a"): cache_ttl must be ≥ 0`},
		{"[[rule]]\nname = \"a\"\ncache_ttl = \"25h\"", `rule[0] ("a"): cache_ttl must be at most 24h0m0s`},
		{"[[rule]]\nname = \"a\"\ncache_ttl = \"5s\"\nerror = true", `rule[0] ("a"): cache_ttl and error exclude each other`},
		{"[[rule]]\nname = \"a\"\ncache_ttl = \"5s\"\nkind = \"write\"", `rule[0] ("a"): cache_ttl caches reads only`},
		{"[[rule]]\nname = \"a\"\ncache_ttl = \"soon\"", "rule[0].cache_ttl"},
	} {
		_, err := Parse([]byte(base + "\n" + tc.doc + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
	if c.Cache.BinlogInvalidation || c.Cache.BinlogServerID != 0 {
		t.Errorf("binlog invalidation on by default: %+v", c.Cache)
	}
	c = mustParse(t, base+"[cache]\nbinlog_invalidation = true\nbinlog_server_id = 4294967295\n")
	if !c.Cache.BinlogInvalidation || c.Cache.BinlogServerID != 4294967295 {
		t.Errorf("[cache] binlog keys %+v", c.Cache)
	}
	old := mustParse(t, base)
	next := mustParse(t, base+"[cache]\nmax_memory = 1000\n")
	ch := Diff(old, next)
	if len(ch) != 1 || ch[0].Key != "cache.max_memory" || ch[0].Restart {
		t.Errorf("diff %+v, want cache.max_memory live", ch)
	}
	ch = Diff(old, mustParse(t, base+"[cache]\nbinlog_invalidation = true\nbinlog_server_id = 7\n"))
	if len(ch) != 2 || ch[0].Key != "cache.binlog_invalidation" || ch[1].Key != "cache.binlog_server_id" || ch[0].Restart || ch[1].Restart {
		t.Errorf("diff %+v, want cache.binlog_invalidation and cache.binlog_server_id live", ch)
	}
}
