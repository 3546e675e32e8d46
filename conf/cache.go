package conf

import (
	"math"
	"time"
)

// Cache is the [cache] table: the result cache that [[rule]] entries with
// cache_ttl fill. Every key is applied on reload.
type Cache struct {
	// MaxMemory bounds the bytes the cached answers (with their keys and
	// bookkeeping) hold; the least recently used go first. 0 switches the
	// cache off: nothing is stored or served, whatever the rules say.
	MaxMemory int64 `toml:"max_memory"`
	// MaxEntry is the largest answer stored, in bytes; a bigger one is
	// relayed as usual and not stored.
	MaxEntry int64 `toml:"max_entry"`
	// OwnWritesWindow: a session that wrote to a table reads it from its
	// backend, not the cache, for this long after the write (its own
	// writes are visible to it whatever reached the cache).
	OwnWritesWindow Duration `toml:"own_writes_window"`
	// BinlogInvalidation tails each cluster's master's binary log (package
	// health/binlog) and invalidates the entries of the tables written
	// there, so writes that bypass sluice show within the tailer's delay
	// rather than at cache_ttl. Off by default: it needs REPLICATION SLAVE
	// for the service account and a binary log on the masters.
	BinlogInvalidation bool `toml:"binlog_invalidation"`
	// BinlogServerID is the server_id the tailers register with; 0 derives
	// one per cluster from the host name and process id (binlog.
	// DefaultServerID). Two sluices tailing the same master need different
	// ids.
	BinlogServerID int64 `toml:"binlog_server_id"`
}

// Defaults of [cache] and bounds of cache_ttl.
const (
	DefaultCacheMaxMemory       = 64 << 20
	DefaultCacheMaxEntry        = 1 << 20
	DefaultCacheOwnWritesWindow = time.Second
	// MaxCacheTTL bounds a rule's cache_ttl: an answer is never served
	// longer than this after its query ran.
	MaxCacheTTL = 24 * time.Hour
)

// defaultCache is [cache] before the file is read.
func defaultCache() Cache {
	return Cache{MaxMemory: DefaultCacheMaxMemory, MaxEntry: DefaultCacheMaxEntry,
		OwnWritesWindow: Duration{DefaultCacheOwnWritesWindow}}
}

// validateCache checks [cache].
func (c *Config) validateCache(p *problems) {
	x := &c.Cache
	if x.MaxMemory < 0 {
		p.add("cache.max_memory must be ≥ 0 bytes (0 switches the cache off), got %d", x.MaxMemory)
	}
	// A max_entry above max_memory is not an error: nothing bigger than
	// max_memory is stored either.
	if x.MaxEntry < 1 {
		p.add("cache.max_entry must be ≥ 1 byte, got %d", x.MaxEntry)
	}
	if x.OwnWritesWindow.Duration < 0 {
		p.add("cache.own_writes_window must be ≥ 0, got %s", x.OwnWritesWindow.Duration)
	}
	// server_id is an unsigned 32-bit value on the master; 0 is no id (a
	// master refuses a replica without one), so it means "derive one".
	if x.BinlogServerID < 0 || x.BinlogServerID > math.MaxUint32 {
		p.add("cache.binlog_server_id must be 0 (derived) or 1 … %d, got %d", uint32(math.MaxUint32), x.BinlogServerID)
	}
}

// validateRuleCache checks a rule's cache_ttl.
func validateRuleCache(p *problems, label string, r *Rule) {
	switch ttl := r.CacheTTL.Duration; {
	case ttl < 0:
		p.add("%s: cache_ttl must be ≥ 0, got %s", label, ttl)
	case ttl > MaxCacheTTL:
		p.add("%s: cache_ttl must be at most %s, got %s", label, MaxCacheTTL, ttl)
	case ttl > 0 && r.Error:
		p.add("%s: cache_ttl and error exclude each other: a refused statement has no answer to cache", label)
	case ttl > 0 && r.Kind != "" && r.Kind != "read":
		p.add("%s: cache_ttl caches reads only, but the rule's kind is %q", label, r.Kind)
	}
}

// diffCache records the changes of [cache]; all are live (a reload starts,
// stops or restarts the binlog tailers).
func (d *differ) cache(old, new *Cache) {
	same(d, "cache.max_memory", old.MaxMemory, new.MaxMemory, live)
	same(d, "cache.max_entry", old.MaxEntry, new.MaxEntry, live)
	same(d, "cache.own_writes_window", old.OwnWritesWindow, new.OwnWritesWindow, live)
	same(d, "cache.binlog_invalidation", old.BinlogInvalidation, new.BinlogInvalidation, live)
	same(d, "cache.binlog_server_id", old.BinlogServerID, new.BinlogServerID, live)
}
